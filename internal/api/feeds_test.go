package api

import (
	"encoding/json"
	"net/http"
	"testing"
)

// GET /api/v1/feeds shows each feed's coverage and spending: the
// repositories fed and unaskable, the requests in the last hour, and each
// token's budget left.
func TestFeedsShowCoverageAndBudgets(t *testing.T) {
	b := newFakeBackend()
	b.feeds = []FeedStatus{{Host: "github.com", State: "feed-limited", Repos: 12, Fed: 0, Unaskable: 3, RequestsLastHour: 60,
		RequestsPerHourMax: 4000, MinAskIntervalSeconds: 60, Tokens: []TokenBudget{{Name: "token 1 of 1", Remaining: 4940, Limit: 5000}}}}
	e := newTestEnv(t, Config{}, b)
	r := e.do(t, "GET", "/api/v1/feeds", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/feeds: %d %s", r.status, r.body)
	}
	var got struct{ Feeds []FeedStatus }
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Feeds) != 1 || got.Feeds[0].State != "feed-limited" || got.Feeds[0].Unaskable != 3 || got.Feeds[0].RequestsLastHour != 60 ||
		len(got.Feeds[0].Tokens) != 1 || got.Feeds[0].Tokens[0].Remaining != 4940 {
		t.Errorf("feeds: %s", r.body)
	}
}
