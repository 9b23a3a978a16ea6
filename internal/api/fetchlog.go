package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/fetchlog"
)

// LogReader reads a fetch log (the full node keeps one): the entries q
// selects, newest first, and the cursor of the next page ("" at the end).
type LogReader interface {
	FetchLog(ctx context.Context, q fetchlog.Query) ([]fetchlog.Entry, string, error)
}

// LogPage is one page of the fetch log.
type LogPage struct {
	Entries []fetchlog.Entry `json:"entries"`
	// Next is the cursor of the following page (?before=), if any.
	Next string `json:"next,omitempty"`
}

// defaultLogLimit is the page size of the fetch log when ?limit is absent.
const defaultLogLimit = 100

// isLogPath tells whether the key path of GET /api/v1/repos/{key...} asks
// for the log of a repository: it ends in /log and is not itself a
// mirrored repository (whose key may end in "log"). It returns the
// repository's part of the path.
func (s *Server) isLogPath(raw string) (string, bool) { return s.subPath(raw, "/log") }

// subPath splits the key path raw of GET /api/v1/repos/{key...} into a
// repository and a route of it (sub, "/log" or "/archive"): raw ends in
// sub and is not itself a mirrored repository. It returns the
// repository's part of the path.
func (s *Server) subPath(raw, sub string) (string, bool) {
	base, ok := strings.CutSuffix(raw, sub)
	if !ok {
		return "", false
	}
	if full, err := s.cfg.Fold.Canonical(raw); err == nil && s.fleet.Repos.Known(full) {
		return "", false
	}
	return base, true
}

// repoLog serves GET /api/v1/repos/{key}/log.
func (s *Server) repoLog(w http.ResponseWriter, r *http.Request, raw string) {
	key, ok := s.mirroredKey(w, raw)
	if !ok {
		return
	}
	q, ok := logQuery(w, r)
	if !ok {
		return
	}
	q.Key = key.String()
	s.writeLog(w, r, q)
}

// fetchLog serves GET /api/v1/log.
func (s *Server) fetchLog(w http.ResponseWriter, r *http.Request) {
	q, ok := logQuery(w, r)
	if !ok {
		return
	}
	if k := r.URL.Query().Get("key"); k != "" {
		key, ok := s.pathKey(w, k)
		if !ok {
			return
		}
		q.Key = key.String()
	}
	s.writeLog(w, r, q)
}

func (s *Server) writeLog(w http.ResponseWriter, r *http.Request, q fetchlog.Query) {
	if s.fleet.Log == nil {
		writeError(w, http.StatusNotImplemented, "this server keeps no fetch log")
		return
	}
	es, next, err := s.fleet.Log.FetchLog(r.Context(), q)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, s.logDetail(r, err))
		return
	}
	if es == nil {
		es = []fetchlog.Entry{}
	}
	if !s.operator(r) {
		for i := range es {
			es[i] = PublicEntry(es[i])
		}
	}
	writeJSON(w, http.StatusOK, LogPage{Entries: es, Next: next})
}

// logDetail is the text of a failure to read the log: the operator's.
func (s *Server) logDetail(r *http.Request, err error) string {
	if s.operator(r) {
		return err.Error()
	}
	return "the fetch log cannot be read now (details with the API token)"
}

// logQuery reads ?limit, ?before, ?since (RFC 3339), ?state (ok, failed
// or cancelled) and ?node; it answers 400 itself when one is bad.
func logQuery(w http.ResponseWriter, r *http.Request) (fetchlog.Query, bool) {
	v := r.URL.Query()
	q := fetchlog.Query{Limit: defaultLogLimit, Before: v.Get("before")}
	bad := func(err error) (fetchlog.Query, bool) {
		writeError(w, http.StatusBadRequest, err.Error())
		return q, false
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > fetchlog.MaxLimit {
			return bad(fmt.Errorf("limit %q: want 1 to %d", l, fetchlog.MaxLimit))
		}
		q.Limit = n
	}
	if b := q.Before; b != "" && strings.ContainsAny(b, "\x00/") {
		return bad(errors.New("before: not a cursor of this log (use the next field of a page)"))
	}
	if t := v.Get("since"); t != "" {
		since, err := time.Parse(time.RFC3339, t)
		if err != nil {
			return bad(fmt.Errorf("since %q: want an RFC 3339 time such as 2026-11-25T14:00:00Z", t))
		}
		q.Since = since
	}
	switch st := v.Get("state"); st {
	case "", fetchlog.ResultOK, fetchlog.ResultFailed, fetchlog.ResultCancelled:
		q.Result = st
	default:
		return bad(fmt.Errorf("state %q: want ok, failed or cancelled", st))
	}
	if n := v.Get("node"); n != "" {
		id, err := strconv.ParseUint(n, 10, 32)
		if err != nil || id == 0 {
			return bad(fmt.Errorf("node %q: want a node ID", n))
		}
		q.Node = uint32(id)
	}
	return q, true
}
