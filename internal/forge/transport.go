package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Defaults of Options.
const (
	DefaultMaxBody  = 8 << 20
	DefaultTimeout  = 30 * time.Second
	DefaultMaxPages = 20
)

// Waits: a forge's word on how long to wait is bounded by maxWait (a
// hostile or broken answer cannot park a feed for a year); errors back
// off from backoffBase, doubling, up to backoffMax; a secondary limit
// without Retry-After waits a minute (GitHub's advice), doubling while
// it repeats (both by package backoff's rule); a refused token rests
// for refusedRest.
const (
	maxWait        = 6 * time.Hour
	backoffBase    = 10 * time.Second
	backoffMax     = 30 * time.Minute
	secondaryWait  = time.Minute
	refusedRest    = time.Hour
	maxFutureSkew  = time.Hour // a push time further ahead of the clock is garbage
	maxErrorDetail = 200       // bytes of a forge's own message kept in an error
)

// Options tune a client; the zero value works.
type Options struct {
	// HTTPClient makes the requests (default: http.DefaultTransport). It
	// is copied: redirects are never followed, so a token goes nowhere
	// but the configured API.
	HTTPClient *http.Client
	Clock      clock.Clock  // default: the wall clock
	Logger     *slog.Logger // default: discard
	UserAgent  string       // default: "gitfleet-forge-feed"
	MaxBody    int64        // largest answer in bytes (default 8 MiB)
	Timeout    time.Duration
	// MaxPages bounds one listing (Lister.ChangedSince).
	MaxPages int
	// MaxOwnerPages bounds one listing of an owner's repositories
	// (OwnerLister; 0: DefaultMaxOwnerPages).
	MaxOwnerPages int
	// Backoff is the first wait after an error, doubling with each error
	// in a row up to 30 minutes (0: 10 s).
	Backoff time.Duration
	// Pace is the least time between two requests to the host (0: the
	// kind's default, 750 ms for Gitee's and 250 ms for GitLab's and
	// Gitea's one-request-a-repository lookups, none for GitHub;
	// negative: none).
	Pace time.Duration
}

// WaitError says that a client may not ask its forge before Until:
// every token rests (Limited: its rate limit is spent, or it was
// refused; Reason says why the first to come back rests), or the client
// backs off after errors (Err is the last one).
type WaitError struct {
	Host    string
	Until   time.Time
	Limited bool
	Reason  string
	Err     error
}

func (e *WaitError) Error() string {
	if e.Limited {
		return fmt.Sprintf("forge %s: every token rests (the first to come back: %s): wait until %s", e.Host, e.Reason, e.Until.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("forge %s: backing off after errors until %s: %v", e.Host, e.Until.UTC().Format(time.RFC3339), e.Err)
}

func (e *WaitError) Unwrap() error { return e.Err }

// tokenState is one token and when it may be used again.
type tokenState struct {
	tok     Token
	name    string // "token 2 of 3": what logs and errors say instead of the token
	until   time.Time
	why     string // why it rests until until
	strikes int    // secondary limits in a row
	// remaining, limit and reset are the forge's last word on the
	// token's limit (remaining -1: none yet).
	remaining, limit int
	reset            time.Time
}

// response is an answer, read whole (within the bound).
type response struct {
	status int
	header http.Header
	body   []byte
}

// request is one API request. The token is added when it is sent.
type request struct {
	method    string
	url       *url.URL
	body      []byte // JSON, for POST
	accept404 bool   // 404 is an answer (a missing repository), not an error
	// acceptMoved: a redirect (301, 302, 307, 308) is an answer (a renamed
	// repository), read and never followed.
	acceptMoved bool
}

// errSpent is returned by a parser that found the token's limit spent in
// the body (and marked it): the request is retried with another token.
var errSpent = errors.New("rate limit spent")

// transport is what every client shares: the HTTP client, the tokens and
// their limits, the backoff after errors and the pace.
type transport struct {
	host     string
	hc       *http.Client
	clk      clock.Clock
	log      *slog.Logger
	ua       string
	maxBody  int64
	timeout  time.Duration
	maxPages int
	// maxOwnerPages bounds ListOwner.
	maxOwnerPages int
	pace          time.Duration
	backoff       time.Duration // the first wait after an error
	// auth adds the token to a request in the kind's way.
	auth func(r *http.Request, secret string)
	sem  chan struct{} // one request at a time to a host

	mu           sync.Mutex
	toks         []*tokenState
	next         int
	retry        *backoff.Backoff // the errors in a row
	backoffUntil time.Time
	lastErr      error
	lastReq      time.Time
	poll         time.Duration // X-Poll-Interval, as last sent
}

func newTransport(f Forge, tokens []Token, opt Options) *transport {
	t := &transport{
		host: f.Host, clk: opt.Clock, log: opt.Logger, ua: opt.UserAgent,
		maxBody: opt.MaxBody, timeout: opt.Timeout, maxPages: opt.MaxPages, maxOwnerPages: opt.MaxOwnerPages, pace: opt.Pace,
		backoff: opt.Backoff, sem: make(chan struct{}, 1),
	}
	if t.backoff <= 0 {
		t.backoff = backoffBase
	}
	hc := http.Client{}
	if opt.HTTPClient != nil {
		hc = *opt.HTTPClient
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	t.hc = &hc
	if t.clk == nil {
		t.clk = clock.Real{}
	}
	t.retry = backoff.New(t.clk, t.backoff, backoffMax)
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.ua == "" {
		t.ua = "gitfleet-forge-feed"
	}
	if t.maxBody <= 0 {
		t.maxBody = DefaultMaxBody
	}
	if t.timeout <= 0 {
		t.timeout = DefaultTimeout
	}
	if t.maxPages <= 0 {
		t.maxPages = DefaultMaxPages
	}
	if t.maxOwnerPages <= 0 {
		t.maxOwnerPages = DefaultMaxOwnerPages
	}
	if t.pace == 0 {
		if ki, ok := lookupKind(f.Kind); ok {
			t.pace = ki.pace
		}
	}
	for i, tok := range tokens {
		t.toks = append(t.toks, &tokenState{tok: tok, name: fmt.Sprintf("token %d of %d", i+1, len(tokens)), remaining: -1})
	}
	if len(t.toks) == 0 {
		t.toks = []*tokenState{{name: "anonymous", remaining: -1}}
	}
	return t
}

// Ready returns when the next request may be made.
func (t *transport) Ready(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := now
	if t.backoffUntil.After(at) {
		at = t.backoffUntil
	}
	if e := t.earliestLocked().until; e.After(at) {
		at = e
	}
	return at
}

// Budgets returns each token's budget left, as the forge last said.
func (t *transport) Budgets() []TokenBudget {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]TokenBudget, len(t.toks))
	for i, ts := range t.toks {
		out[i] = TokenBudget{Name: ts.name, Remaining: ts.remaining, Limit: ts.limit, Reset: ts.reset, RestsUntil: ts.until}
	}
	return out
}

// PollInterval returns the X-Poll-Interval the forge last sent.
func (t *transport) PollInterval() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.poll
}

// noteBudget records what the forge said of ts's limit (limit 0: not
// said).
func (t *transport) noteBudget(ts *tokenState, remaining, limit int, reset time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts.remaining, ts.reset = remaining, reset
	if limit > 0 {
		ts.limit = limit
	}
}

// earliestLocked returns the token that rests the shortest.
func (t *transport) earliestLocked() *tokenState {
	e := t.toks[0]
	for _, ts := range t.toks[1:] {
		if ts.until.Before(e.until) {
			e = ts
		}
	}
	return e
}

// pick returns the next usable token in turn, or why there is none.
func (t *transport) pick(now time.Time) (*tokenState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Before(t.backoffUntil) {
		return nil, &WaitError{Host: t.host, Until: t.backoffUntil, Err: t.lastErr}
	}
	for i := range t.toks {
		ts := t.toks[(t.next+i)%len(t.toks)]
		if !now.Before(ts.until) {
			t.next = (t.next + i + 1) % len(t.toks)
			return ts, nil
		}
	}
	e := t.earliestLocked()
	return nil, &WaitError{Host: t.host, Until: e.until, Limited: true, Reason: e.name + ": " + e.why}
}

// spend rests a token until until (bounded by maxWait).
func (t *transport) spend(ts *tokenState, now, until time.Time, why string) {
	if until.After(now.Add(maxWait)) {
		until = now.Add(maxWait)
	}
	t.mu.Lock()
	if until.After(ts.until) {
		ts.until, ts.why = until, why
	}
	t.mu.Unlock()
	t.log.Info("forge token rests", "host", t.host, "token", ts.name, "until", until.UTC(), "why", why)
}

// failed records an error and sets the backoff (at least until
// retryAt), returning err with the host.
func (t *transport) failed(err error, now, retryAt time.Time) error {
	err = fmt.Errorf("forge %s: %w", t.host, t.redact(err))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.backoffUntil = now.Add(t.retry.Failed())
	if retryAt.After(t.backoffUntil) {
		t.backoffUntil = retryAt
	}
	t.lastErr = err
	return err
}

func (t *transport) succeeded(ts *tokenState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retry.Reset()
	t.backoffUntil, t.lastErr = time.Time{}, nil
	ts.strikes = 0
}

// redact replaces the tokens in an error's text, for errors that quote a
// forge's answer (which could echo what it was sent).
func (t *transport) redact(err error) error {
	msg := err.Error()
	out := msg
	for _, ts := range t.toks {
		if s := ts.tok.secret(); s != "" {
			out = strings.ReplaceAll(out, s, redacted)
		}
	}
	if out == msg {
		return err
	}
	return errors.New(out)
}

// errBadName: a forge answered a name that is not a repository name.
var errBadName = errors.New("not a repository name")

// screen leaves out of a the repositories whose names, as the forge gave
// them, carry one of the client's tokens or look like any credential
// (repokey.Redact would change them): a hostile or broken forge's echo
// of what it was sent, which would otherwise reach a log line. They
// count in Refused. The names a was asked with are the caller's own.
func (t *transport) screen(a Answer) Answer {
	bad := func(name string) bool {
		if repokey.Redact(name) != name {
			return true
		}
		for _, ts := range t.toks {
			if s := ts.tok.secret(); s != "" && strings.Contains(name, s) {
				return true
			}
		}
		return false
	}
	keep := func(n int, drop func(i int) bool) []int {
		var idx []int
		for i := range n {
			if drop(i) {
				a.Refused++
				continue
			}
			idx = append(idx, i)
		}
		return idx
	}
	pushed := a.Pushed[:0:0]
	for _, i := range keep(len(a.Pushed), func(i int) bool { return bad(a.Pushed[i].Path) }) {
		pushed = append(pushed, a.Pushed[i])
	}
	renamed := a.Renamed[:0:0]
	for _, i := range keep(len(a.Renamed), func(i int) bool { return bad(a.Renamed[i].To) }) {
		renamed = append(renamed, a.Renamed[i])
	}
	forks := a.Forks[:0:0]
	for _, i := range keep(len(a.Forks), func(i int) bool { return bad(a.Forks[i].Parent) }) {
		forks = append(forks, a.Forks[i])
	}
	heads := a.Heads[:0:0]
	for _, i := range keep(len(a.Heads), func(i int) bool { return bad(a.Heads[i].Branch) }) {
		heads = append(heads, a.Heads[i])
	}
	a.Pushed, a.Renamed, a.Forks, a.Heads = pushed, renamed, forks, heads
	return a
}

// do sends rq with the next usable token and hands a 2xx answer (and a
// 404 if rq.accept404) to parse. A spent or refused token is set aside
// and the request tried with the next one; other failures set the
// backoff. It returns a *WaitError when no request may be made now.
func (t *transport) do(ctx context.Context, rq request, parse func(response, *tokenState) error) error {
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.sem }()
	for range len(t.toks) + 1 {
		ts, err := t.pick(t.clk.Now())
		if err != nil {
			return err
		}
		if err := t.waitPace(ctx); err != nil {
			return err
		}
		resp, err := t.send(ctx, rq, ts)
		now := t.clk.Now()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // the caller's doing, not the forge's
			}
			return t.failed(err, now, time.Time{})
		}
		spent := t.noteLimits(ts, resp, now)
		switch {
		case resp.status/100 == 2 || resp.status == http.StatusNotFound && rq.accept404 || moved(resp.status) && rq.acceptMoved:
			err := parse(resp, ts)
			if errors.Is(err, errSpent) {
				continue
			}
			if err != nil {
				return t.failed(err, now, time.Time{})
			}
			t.succeeded(ts)
			return nil
		case spent:
			continue
		case resp.status == http.StatusUnauthorized:
			t.spend(ts, now, now.Add(refusedRest), "refused (401): check the token")
			continue
		}
		retryAt, _ := retryAfter(resp.header, now)
		return t.failed(statusError(rq, resp), now, retryAt)
	}
	return t.failed(errors.New("every token was refused or spent in one request"), t.clk.Now(), time.Time{})
}

// noteLimits reads the rate-limit headers of an answer and sets the token
// aside when its limit is spent. It says whether the answer is a refusal
// for a limit (403 or 429), which another token may not get.
func (t *transport) noteLimits(ts *tokenState, resp response, now time.Time) (limited bool) {
	remaining, reset, ok := rateHeaders(resp.header, now)
	if ok {
		limit, _ := strconv.Atoi(strings.TrimSpace(resp.header.Get("X-RateLimit-Limit")))
		if limit <= 0 {
			limit, _ = strconv.Atoi(strings.TrimSpace(resp.header.Get("RateLimit-Limit")))
		}
		t.noteBudget(ts, remaining, limit, reset)
	}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.header.Get("X-Poll-Interval"))); err == nil && s > 0 {
		t.mu.Lock()
		t.poll = min(time.Duration(s)*time.Second, maxWait)
		t.mu.Unlock()
	}
	if ok && remaining == 0 {
		t.spend(ts, now, reset, "primary rate limit spent")
	}
	if resp.status != http.StatusForbidden && resp.status != http.StatusTooManyRequests {
		return false
	}
	if ra, ok := retryAfter(resp.header, now); ok {
		t.spend(ts, now, ra, fmt.Sprintf("%d with Retry-After", resp.status))
		return true
	}
	if ok && remaining == 0 {
		return true
	}
	if resp.status == http.StatusTooManyRequests || bytes.Contains(bytes.ToLower(resp.body), []byte("rate limit")) {
		t.mu.Lock()
		ts.strikes++
		wait := backoff.Delay(ts.strikes, secondaryWait, maxWait)
		t.mu.Unlock()
		t.spend(ts, now, now.Add(wait), fmt.Sprintf("secondary rate limit (%d)", resp.status))
		return true
	}
	return false
}

// waitPace waits until the pace allows the next request.
func (t *transport) waitPace(ctx context.Context) error {
	if t.pace > 0 {
		t.mu.Lock()
		last := t.lastReq
		t.mu.Unlock()
		if !last.IsZero() {
			if d := last.Add(t.pace).Sub(t.clk.Now()); d > 0 {
				select {
				case <-t.clk.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
	}
	t.mu.Lock()
	t.lastReq = t.clk.Now()
	t.mu.Unlock()
	return nil
}

// send makes the request and reads the answer within the bounds. Its
// errors name the URL without the token.
func (t *transport) send(ctx context.Context, rq request, ts *tokenState) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, rq.url.String(), body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", rq.method, rq.url.Redacted(), err)
	}
	req.Header.Set("User-Agent", t.ua)
	req.Header.Set("Accept", "application/json")
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s := ts.tok.secret(); s != "" {
		t.auth(req, s)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the URL, which may hold the token
		}
		return response{}, fmt.Errorf("%s %s: %w", rq.method, rq.url.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > t.maxBody {
		return response{}, fmt.Errorf("%s %s: answer of %d bytes, over the bound of %d", rq.method, rq.url.Redacted(), resp.ContentLength, t.maxBody)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, t.maxBody+1))
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading the answer: %w", rq.method, rq.url.Redacted(), err)
	}
	if int64(len(b)) > t.maxBody {
		return response{}, fmt.Errorf("%s %s: answer over the bound of %d bytes", rq.method, rq.url.Redacted(), t.maxBody)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// moved tells whether status is a redirect that names where a resource is
// now.
func moved(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

func statusError(rq request, resp response) error {
	msg := fmt.Sprintf("%s %s: %d %s", rq.method, rq.url.Redacted(), resp.status, http.StatusText(resp.status))
	if resp.status/100 == 3 {
		msg += " (redirects are not followed: check the api URL)"
	}
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(resp.body, &m) == nil && m.Message != "" {
		msg += ": " + truncate(m.Message)
	}
	return errors.New(msg)
}

func truncate(s string) string {
	if len(s) > maxErrorDetail {
		return s[:maxErrorDetail] + "..."
	}
	return s
}

// rateHeaders reads X-RateLimit-Remaining/-Reset (GitHub, Gitea) or
// RateLimit-Remaining/-Reset (GitLab). A reset is epoch seconds, or
// seconds from now when small (the IETF draft's form); a reset that is
// missing or past means a minute from now.
func rateHeaders(h http.Header, now time.Time) (remaining int, reset time.Time, ok bool) {
	rem, res := h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")
	if rem == "" {
		rem, res = h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset")
	}
	n, err := strconv.Atoi(strings.TrimSpace(rem))
	if err != nil || n < 0 {
		return 0, time.Time{}, false
	}
	reset = now.Add(secondaryWait)
	if r, err := strconv.ParseInt(strings.TrimSpace(res), 10, 64); err == nil && r > 0 {
		at := time.Unix(r, 0)
		if r < 1e9 {
			at = now.Add(time.Duration(min(r, int64(maxWait/time.Second))) * time.Second)
		}
		if at.After(now) {
			reset = at
		}
	}
	return n, reset, true
}

// retryAfter reads Retry-After: seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Time, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Time{}, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return time.Time{}, false
		}
		return now.Add(time.Duration(min(s, int64(maxWait/time.Second))) * time.Second), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}, false
	}
	if at.Before(now) {
		at = now
	}
	return at, true
}

// decodeStrict decodes one JSON value, and nothing after it.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON answer: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON answer: data after the JSON value")
	}
	return nil
}

// parseTime reads a forge's timestamp (RFC 3339), refusing times further
// ahead of now than clocks drift.
func parseTime(s string, now time.Time) (time.Time, error) {
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q: want RFC 3339", truncate(s))
	}
	if at.After(now.Add(maxFutureSkew)) {
		return time.Time{}, fmt.Errorf("time %s is in the future", s)
	}
	return at, nil
}

// validPath checks a repository path of a forge's answer or of a lookup:
// a repository name (ValidName) of segments segments (0: any number from
// two).
func validPath(p string, segments int) bool {
	return ValidName(p) && (segments == 0 || strings.Count(p, "/") == segments-1)
}

// ValidName says whether p can be a repository's full name on a forge:
// two segments or more ("owner/name", GitLab's "group/subgroup/name"),
// each of the ASCII letters, digits, '.', '_' and '-' that GitHub, GitLab,
// Gitea and Gitee allow, none "." or "..", 512 bytes at most. A name from
// a forge's answer or a webhook's payload that is not one is refused:
// nothing else (a path's "../", a control character, a URL) can then
// pass as a repository into a key, a log line or the API.
func ValidName(p string) bool {
	if p == "" || len(p) > 512 {
		return false
	}
	parts := strings.Split(p, "/")
	if len(parts) < 2 {
		return false
	}
	for _, s := range parts {
		if s == "" || s == "." || s == ".." {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}
