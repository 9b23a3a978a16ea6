package api

import (
	"net/http"
	"time"
)

// FeedReader tells what the coordinator last said of the forges' change
// feeds.
type FeedReader interface {
	Feeds() []FeedStatus
}

// FeedStatus is one forge host's change feed: what it covers and what it
// spends.
type FeedStatus struct {
	Host string `json:"host"`
	// State is working, failing (requests fail), limited (a rate limit
	// held it back past --fed-max-age) or starting (no answer yet).
	State string `json:"state"`
	// Repos are the host's repositories the feed asks about; Fed those it
	// answered for within --fed-max-age (the rest are checked by their
	// nodes as unfed); Unaskable those the forge's API cannot name, never
	// asked about and never fed.
	Repos     int `json:"repos"`
	Fed       int `json:"fed"`
	Unaskable int `json:"unaskable"`
	// RequestsLastHour are the requests made in the last hour, and
	// RequestsPerHourMax the ceiling (every token's): the feed asks only
	// what is due, so it usually spends far less.
	RequestsLastHour   int     `json:"requests_last_hour"`
	RequestsPerHourMax float64 `json:"requests_per_hour_max"`
	// MinAskIntervalSeconds is the least time between two asks about one
	// repository (--forge-min-ask-interval, or the forge's longer
	// X-Poll-Interval).
	MinAskIntervalSeconds float64       `json:"min_ask_interval_seconds"`
	AnsweredAt            *time.Time    `json:"answered_at,omitempty"`
	Tokens                []TokenBudget `json:"tokens"`
}

// TokenBudget is what a feed's token has left of its rate limit, as the
// forge last said. Name is "token N of M", never the token.
type TokenBudget struct {
	Name string `json:"name"`
	// Remaining is -1 until the forge said.
	Remaining  int        `json:"remaining"`
	Limit      int        `json:"limit,omitempty"`
	Reset      *time.Time `json:"reset,omitempty"`
	RestsUntil *time.Time `json:"rests_until,omitempty"`
}

func (s *Server) feeds(w http.ResponseWriter, _ *http.Request) {
	out := []FeedStatus{}
	if s.fleet.Feeds != nil {
		out = append(out, s.fleet.Feeds.Feeds()...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"feeds": out})
}
