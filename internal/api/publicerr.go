package api

import (
	"net/http"
	"strings"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/forge"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

// PublicError is what anonymous readers see of the error text msg whose
// class is c: the class's text (repostate.Class), since git's stderr tells
// open ports from closed ones and shows volunteers' file paths; the
// operator (with the API token) sees the text. "" stays "", and a text
// without a class (one a previous version stored) is "failed".
func PublicError(msg string, c repostate.Class) string {
	if msg == "" {
		return ""
	}
	return c.OrOther().String()
}

// PublicErrorText is PublicError for a class kept as its text (the fetch
// log's entries): a text this version does not know is "failed".
func PublicErrorText(msg, class string) string {
	c, _ := repostate.ParseClass(class)
	return PublicError(msg, c)
}

// operator tells whether r carries the API token (or, relayed, carried
// the relaying node's: relay.go): such readers see error details. It
// answers nothing itself (reads are public).
func (s *Server) operator(r *http.Request) bool {
	if c, ok := relayed(r); ok {
		return c.operator
	}
	scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return s.cfg.Token != "" && strings.EqualFold(scheme, "Bearer") && forge.EqualSecret(strings.TrimSpace(got), s.cfg.Token)
}

// PublicCatalogURL is where the catalog comes from as anonymous readers
// see it: a network URL (its credentials redacted already), or "" for a
// path on the coordinator's machine (file:// too), which is the operator's
// as the paths in error texts are.
func PublicCatalogURL(u string) string {
	if scheme, _, _ := strings.Cut(u, "://"); !catalog.IsURL(u) || strings.EqualFold(scheme, "file") {
		return ""
	}
	return u
}

// PublicEntry is what anonymous readers see of a fetch log entry: its
// error as its class (PublicErrorText), and none of the old IDs of the
// refs it rewrote (deleted, moved tags, force-pushed branches): its
// Rewrites are counted in RewritesOmitted, and its Moves of those refs
// lose their old IDs (all of them, when some rewrites were not listed).
// An old tip names what the upstream took away, a leaked secret say; the
// operator, with the API token, sees it to undo a rewrite by hand.
func PublicEntry(e fetchlog.Entry) fetchlog.Entry {
	e.Error = PublicErrorText(e.Error, e.ErrorClass)
	if len(e.Rewrites) == 0 && e.RewritesOmitted == 0 {
		return e
	}
	rewritten := make(map[string]bool, len(e.Rewrites))
	for _, rw := range e.Rewrites {
		rewritten[rw.Ref] = true
	}
	if len(e.Moves) > 0 {
		moves := make([]fetchlog.Move, len(e.Moves))
		for i, m := range e.Moves {
			if rewritten[m.Ref] || e.RewritesOmitted > 0 {
				m.Old = ""
			}
			moves[i] = m
		}
		e.Moves = moves
	}
	e.RewritesOmitted += len(e.Rewrites)
	e.Rewrites = nil
	return e
}

// publicRepo hides the error details of repo from anonymous readers.
func publicRepo(repo *Repo) { repo.LastError = PublicError(repo.LastError, repo.ErrorClass) }

// publicDetail hides the error details of d, and the old IDs of the refs
// its history rewrote, from anonymous readers (see PublicEntry).
func publicDetail(d *RepoDetail) {
	publicRepo(&d.Repo)
	h := make([]HistoryEntry, len(d.History))
	for i, e := range d.History {
		e.Error = PublicErrorText(e.Error, e.ErrorClass)
		e.RewritesOmitted += len(e.Rewrites)
		e.Rewrites = nil
		h[i] = e
	}
	d.History = h
}

// publicTask hides the error details of t from anonymous readers.
func publicTask(t Task) Task {
	t.Error = PublicError(t.Error, t.ErrorClass)
	return t
}

// detail is the text of err, a failure to reach the coordinator, for the
// operator; anyone else is told only that.
func (s *Server) detail(r *http.Request, err error) string {
	if s.operator(r) {
		return err.Error()
	}
	return "the coordinator is out of reach (details with the API token)"
}
