package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/network"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

const (
	defaultLimit = 100
	maxLimit     = 1000
	// maxWait caps ?wait= so that a request cannot pin a connection.
	maxWait = 60 * time.Second
	// startTimeout bounds the hand-over of a check to the fleet.
	startTimeout = 30 * time.Second
)

// RepoReader reads the repositories the full node holds, as the API shows
// them.
type RepoReader interface {
	// ListRepos returns one page of the repositories that match f and how
	// many match in all.
	ListRepos(ctx context.Context, f RepoFilter) (repos []Repo, total int)
	// GetRepo returns one repository in detail (its refs read from disk).
	GetRepo(ctx context.Context, key repokey.Key) (RepoDetail, bool)
	// Known tells whether key is mirrored, from memory.
	Known(key repokey.Key) bool
}

// CatalogEditor changes and describes the fleet's catalog: the
// repositories added and removed through the API, the catalog applied,
// and its held removals.
type CatalogEditor interface {
	// AddRepo adds a repository persistently; with update, it replaces
	// the attributes of one already held with that upstream. Errors
	// wrapping repokey.ErrInvalid are the caller's fault (400), ErrKeyCollision
	// says the key is held with another upstream (409); any other error
	// means the fleet cannot take it now (503).
	AddRepo(ctx context.Context, url string, attrs map[string]string, update bool) (Repo, error)
	// RemoveRepo removes a repository; an error wrapping ErrNotFound gives
	// 404.
	RemoveRepo(ctx context.Context, key repokey.Key) error
	// Catalog describes the catalog the coordinator applied, and the
	// removals held because they would remove too many repositories
	// within the purge window.
	Catalog(ctx context.Context) (CatalogStatus, error)
	// ConfirmPurge applies the held removals; an error wrapping
	// ErrNothingPending gives 409.
	ConfirmPurge(ctx context.Context) (string, error)
}

// CheckRunner starts and stops the on-demand checks of fetch tasks.
type CheckRunner interface {
	// StartFetch routes an on-demand check of key to its owner, which
	// then reports on the task through Tasks.Running and Tasks.Finish.
	StartFetch(ctx context.Context, key repokey.Key, taskID string) error
	// CancelFetch stops the check of key that task taskID asked for,
	// wherever it is: waiting on the owner, or running (its git processes
	// are killed). A task that never reached an owner needs nothing. An
	// error means the check could not be told to stop.
	CancelFetch(ctx context.Context, key, taskID string) error
}

type listResponse struct {
	Repos  []Repo `json:"repos"`
	Total  int    `json:"total"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func (s *Server) listRepos(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := RepoFilter{Prefix: q.Get("prefix"), Limit: defaultLimit}
	if v := q.Get("state"); v != "" {
		st, err := repostate.Parse(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		f.State = &st
	}
	if v := q.Get("network"); v != "" {
		if err := network.CheckAnyName(v); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		f.Network = v
	}
	if v := q.Get("owner"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("owner %q: want a node ID (a number)", v))
			return
		}
		f.Owner = uint32(n)
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("offset %q: want a number >= 0", v))
			return
		}
		f.Offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a number from 1 to %d (page with offset)", v, maxLimit))
			return
		}
		f.Limit = n
	}
	repos, total := s.fleet.Repos.ListRepos(r.Context(), f)
	if repos == nil {
		repos = []Repo{}
	}
	base, op := s.cloneBase(r), s.operator(r)
	for i := range repos {
		fillCloneURL(&repos[i], base)
		if !op {
			publicRepo(&repos[i])
		}
	}
	writeJSON(w, http.StatusOK, listResponse{Repos: repos, Total: total, Offset: f.Offset, Limit: f.Limit})
}

// cloneBase is the base of public clone URLs.
func (s *Server) cloneBase(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimSuffix(s.cfg.PublicURL, "/")
	}
	if c, ok := relayed(r); ok && c.base != "" {
		return c.base
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func fillCloneURL(repo *Repo, base string) {
	if repo.CloneURL == "" {
		repo.CloneURL = base + "/" + repo.Key + ".git"
	}
}

// pathKey returns the repository key of the request path in canonical
// form, answering 400 itself when it is not a valid key: where an API
// call's key arrives, and its one check (the fleet takes the Key's word).
func (s *Server) pathKey(w http.ResponseWriter, key string) (repokey.Key, bool) {
	k, err := s.cfg.Fold.Canonical(key)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return k, true
}

// mirroredKey is pathKey for a route of a repository that must be mirrored:
// 404 not_mirrored for one that is not.
func (s *Server) mirroredKey(w http.ResponseWriter, raw string) (repokey.Key, bool) {
	key, ok := s.pathKey(w, raw)
	if ok && !s.fleet.Repos.Known(key) {
		writeError(w, http.StatusNotFound, repostate.NotMirrored(key.String()))
		return "", false
	}
	return key, ok
}

func (s *Server) getRepo(w http.ResponseWriter, r *http.Request) {
	if base, isLog := s.isLogPath(r.PathValue("key")); isLog {
		s.repoLog(w, r, base)
		return
	}
	if base, isArchive := s.isArchivePath(r.PathValue("key")); isArchive {
		s.repoArchive(w, r, base)
		return
	}
	key, ok := s.pathKey(w, r.PathValue("key"))
	if !ok {
		return
	}
	d, found := s.fleet.Repos.GetRepo(r.Context(), key)
	if !found {
		writeError(w, http.StatusNotFound, repostate.NotMirrored(key.String()))
		return
	}
	fillCloneURL(&d.Repo, s.cloneBase(r))
	if !s.operator(r) {
		publicDetail(&d)
	}
	writeJSON(w, http.StatusOK, d)
}

// addRequest is the body of POST /api/v1/repos.
type addRequest struct {
	URL   string            `json:"url"`
	Attrs map[string]string `json:"attrs"`
}

func (s *Server) addRepo(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	body, ok := readBody(w, r, s.maxBody(defaultMaxAPIBody))
	if !ok {
		return
	}
	var req addRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.URL == "" {
		writeError(w, http.StatusBadRequest, `"url" is required`)
		return
	}
	if !checkAttrs(w, req.Attrs) {
		return
	}
	key, _, err := s.normalizeUpstream(r.Context(), req.URL)
	if err != nil {
		if egress.IsBlocked(err) {
			writeCodedError(w, http.StatusForbidden, "blocked_destination", err.Error())
			return
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	status := http.StatusCreated
	if s.fleet.Repos.Known(key) {
		status = http.StatusOK
	}
	repo, err := s.fleet.Catalog.AddRepo(r.Context(), req.URL, req.Attrs, false)
	s.writeAdded(w, r, "add", key, repo, status, err)
}

// writeAdded answers an addition or an update of key with repo, or with
// err's status: 400 for an invalid URL, 409 key_collision, else 503.
func (s *Server) writeAdded(w http.ResponseWriter, r *http.Request, verb string, key repokey.Key, repo Repo, status int, err error) {
	switch {
	case errors.Is(err, repokey.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrKeyCollision):
		writeCodedError(w, http.StatusConflict, "key_collision", err.Error())
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("cannot %s %s now: %v", verb, key, err))
	default:
		fillCloneURL(&repo, s.cloneBase(r))
		writeJSON(w, status, repo)
	}
}

func checkAttrs(w http.ResponseWriter, attrs map[string]string) bool {
	for k := range attrs {
		if k == "" || k == "url" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("attribute name %q is not allowed", k))
			return false
		}
	}
	return true
}

// updateRequest is the body of PATCH /api/v1/repos/{key}.
type updateRequest struct {
	Attrs map[string]string `json:"attrs"`
}

// updateRepo replaces a repository's attributes; its upstream stays (a new
// upstream is a removal and an addition).
func (s *Server) updateRepo(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	key, ok := s.pathKey(w, r.PathValue("key"))
	if !ok {
		return
	}
	body, ok := readBody(w, r, s.maxBody(defaultMaxAPIBody))
	if !ok {
		return
	}
	var req updateRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !checkAttrs(w, req.Attrs) {
		return
	}
	d, known := s.fleet.Repos.GetRepo(r.Context(), key)
	if !known || d.UpstreamURL == "" {
		writeError(w, http.StatusNotFound, repostate.NotMirrored(key.String()))
		return
	}
	repo, err := s.fleet.Catalog.AddRepo(r.Context(), d.UpstreamURL, req.Attrs, true)
	s.writeAdded(w, r, "update", key, repo, http.StatusOK, err)
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON body: data after the JSON value")
	}
	return nil
}

func (s *Server) removeRepo(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	key, ok := s.pathKey(w, r.PathValue("key"))
	if !ok {
		return
	}
	err := s.fleet.Catalog.RemoveRepo(r.Context(), key)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, repostate.NotMirrored(key.String()))
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("cannot remove %s now: %v", key, err))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// fetch is POST /api/v1/repos/{key}/fetch: an on-demand check.
func (s *Server) fetch(w http.ResponseWriter, r *http.Request) {
	raw, isFetch := strings.CutSuffix(r.PathValue("key"), "/fetch")
	if !isFetch {
		methodNotAllowed("GET, DELETE")(w, r)
		return
	}
	if !s.authorized(w, r) {
		return
	}
	key, ok := s.pathKey(w, raw)
	if !ok {
		return
	}
	wait, ok := parseWait(w, r)
	if !ok {
		return
	}
	if !s.fleet.Repos.Known(key) {
		writeError(w, http.StatusNotFound, repostate.NotMirrored(key.String()))
		return
	}
	t, err := s.request(key)
	if err != nil {
		writeHostBusy(w, err)
		return
	}
	if wait > 0 {
		t = s.waitTask(r.Context(), t, wait)
	}
	w.Header().Set("Location", "/api/v1/tasks/"+t.ID)
	status := http.StatusAccepted
	if t.Final() {
		status = http.StatusOK
	}
	writeJSON(w, status, t)
}

// request asks for a check of key, starting one unless it joins a task
// that has not started yet. A new check takes a token of its host's rate
// (see hostRate); without one, it fails with a *hostBusyError.
func (s *Server) request(key repokey.Key) (Task, error) {
	t, isNew, err := s.tasks.request(key.String(), false, func(now time.Time) (time.Time, error) {
		return now, s.admitHost(key, now)
	})
	if isNew {
		s.start(t, key)
	}
	return t, err
}

// requestPaced is request for a webhook: checks of one repository are
// also paced (see pacer), the pushes in between folded into one. heard is
// called once the request is taken, before any check starts.
func (s *Server) requestPaced(key repokey.Key, heard func()) (Task, error) {
	t, isNew, err := s.tasks.request(key.String(), true, func(now time.Time) (time.Time, error) {
		if err := s.admitHost(key, now); err != nil {
			return time.Time{}, err
		}
		return s.pacer.reserve(key.String(), now), nil
	})
	if err != nil {
		return t, err
	}
	heard()
	if isNew {
		s.start(t, key)
	}
	return t, nil
}

// hostBusyError is an urgent check refused because its upstream host has
// had its share (429 with Retry-After).
type hostBusyError struct {
	host string
	wait time.Duration
}

func (e *hostBusyError) Error() string {
	return fmt.Sprintf("too many urgent checks of %s at once: retry in %v (--webhook-host-rate)", e.host, e.wait.Round(time.Second))
}

// admitHost takes a token of key's host for a new urgent check.
func (s *Server) admitHost(key repokey.Key, now time.Time) error {
	host := key.Host()
	if wait, ok := s.hostRate.take(host, now); !ok {
		return &hostBusyError{host: host, wait: wait}
	}
	return nil
}

// writeHostBusy answers 429 with the Retry-After of a *hostBusyError.
func writeHostBusy(w http.ResponseWriter, err error) {
	var busy *hostBusyError
	if !errors.As(err, &busy) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	secs := int64((busy.wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	writeCodedError(w, http.StatusTooManyRequests, "host_rate", err.Error())
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	wait, ok := parseWait(w, r)
	if !ok {
		return
	}
	t, found := s.tasks.Get(r.PathValue("id"))
	if !found {
		writeError(w, http.StatusNotFound, "no such task (finished tasks are kept for a while only)")
		return
	}
	if wait > 0 {
		t = s.waitTask(r.Context(), t, wait)
	}
	if !s.operator(r) {
		t = publicTask(t)
	}
	writeJSON(w, http.StatusOK, t)
}

// parseWait reads ?wait= ("30s", or a number of seconds), capped at
// maxWait; it answers 400 itself when the value is bad.
func parseWait(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if n, aerr := strconv.Atoi(v); aerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil || d < 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("wait %q: want a duration such as 30s (at most %v)", v, maxWait))
		return 0, false
	}
	return min(d, maxWait), true
}

// waitTask waits up to d (on the server's clock) for t to end and returns
// its latest state.
func (s *Server) waitTask(ctx context.Context, t Task, d time.Duration) Task {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.clk.After(d):
			cancel()
		case <-ctx.Done():
		}
	}()
	if latest, err := s.tasks.Wait(ctx, t.ID); err == nil || !errors.Is(err, ErrNotFound) {
		return latest
	}
	return t
}

// start hands task t, of key, to the fleet in the background, after the
// task it follows (if any) has ended, so that a follow-up check sees what
// was pushed while the previous one ran.
func (s *Server) start(t Task, key repokey.Key) {
	s.background(func(ctx context.Context) {
		if t.after != "" {
			// Returns when that task ends, expires or is forgotten.
			_, _ = s.tasks.Wait(ctx, t.after)
			if ctx.Err() != nil {
				return
			}
		}
		if d := t.notBefore.Sub(s.clk.Now()); d > 0 {
			select {
			case <-s.clk.After(d):
			case <-s.tasks.hurried(t.ID):
			case <-ctx.Done():
				return
			}
		}
		if now, _ := s.tasks.Get(t.ID); now.Final() {
			return // cancelled while it waited
		}
		ctx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		if err := s.fleet.Checks.StartFetch(ctx, key, t.ID); err != nil {
			s.log.Warn("api: cannot start an on-demand check", "key", t.Key, "task", t.ID, "err", err)
			s.tasks.Finish(t.ID, TaskResult{Err: "cannot start the check: " + err.Error(), Class: repostate.ClassInternal})
		}
	})
}

func (s *Server) catalog(w http.ResponseWriter, r *http.Request) {
	st, err := s.fleet.Catalog.Catalog(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "cannot read the catalog's state now: "+s.detail(r, err))
		return
	}
	if !s.operator(r) {
		// The text names the operator's catalog URL or path.
		st.Error = PublicError(st.Error, st.ErrorClass)
		st.URL = PublicCatalogURL(st.URL)
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) confirmPurge(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	msg, err := s.fleet.Catalog.ConfirmPurge(r.Context())
	switch {
	case errors.Is(err, ErrNothingPending):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "cannot confirm now: "+err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]string{"message": msg})
	}
}
