// Package gitserve serves bare repositories read-only over git's smart HTTP
// protocol (v0 and v2), by running `git upload-pack --stateless-rpc` through
// gitcmd. A stock `git clone http://host/<key>.git` works against it. It
// serves only what its Resolver says exists and what its refs reach (or
// reached in a listing of the last seconds: see recentTips), never
// receive-pack, and checks each request whole before git sees it (a
// malformed one gets a 4xx, never a 500). It serves each client (an IPv4
// address or an IPv6 /64: ClientAddr) a share of requests at once, and
// caps the upload-packs it runs, in all and per repository; a request
// over either waits its turn in a fair queue, for a bounded time. What
// depends on the refs alone (the refs advertisement, ls-refs listings,
// whether wanted commits are reachable) is made once per state of the
// refs and shared (refsView); the advertisement, the v2 capabilities and
// the listings are written from the refs' files without git (refsModel,
// with what the served git advertises read from it once: capsTemplate),
// so that a clone runs one upload-pack, for its pack. With a PackCache,
// identical fetches share one run, whose output it keeps in files for a
// while, once its pack is checked whole (checkAnswer), and sends from
// them with sendfile; an answer unlikely to be asked for again (a
// filtered, shallow or incremental fetch's) is kept only when it is
// (CacheConfig.Window).
// ConnLimit caps the connections that one client holds open to the
// server it wraps.
package gitserve

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Resolver maps a repository key to its directory on disk; ok is false when
// the repository is not served (a 404). The key was parsed from the request
// path (repokey.Folding.Canonical): a Resolver need not check it again.
type Resolver func(key repokey.Key) (dir string, ok bool)

// Handler serves git smart HTTP for the keys that resolve. A request is
// read whole and checked before any upload-pack starts: the Git-Protocol
// header, the command (ls-refs and fetch only), the filter (cheap ones
// only) and the wanted objects (only what the served refs reach, commits,
// tags, trees and blobs alike); a have that the refs do not reach is left
// out of the request, so that upload-pack never acknowledges it (see
// servedHaves). The body is bounded in size and in read time. Then the
// request waits its turn, if it must: behind its client's other requests
// (each client address has a share of requests in service), then for an
// upload-pack slot (runs are capped in all and per repository), in fair
// queues that take clients in turn, for a bounded wait (see turn). Requests that find
// the refs in one state share the answers and checks that depend on
// nothing else (see refsView). With a Cache, identical fetch requests
// share one run (see PackCache). Set the fields before the first request.
type Handler struct {
	Git     *gitcmd.Runner
	Resolve Resolver
	Log     *slog.Logger
	Limits
	// Timeout bounds one upload-pack run (default 30 minutes).
	Timeout time.Duration
	// OnFailure, when set, is told of every upload-pack that failed while
	// a client was still there (a corrupt repository shows this way).
	OnFailure func(key string, err error)
	// Cache, when set, shares fetch runs between identical requests.
	Cache *PackCache
	// Clock times the queue's waits (default the wall clock).
	Clock clock.Clock
	// Fold says which hosts' paths are case-insensitive: a request for
	// github.com/Git/Git.git is one for github.com/git/git.
	Fold repokey.Folding
	// Relay, when set, is asked for the handler of a repository that does
	// not resolve (nil: not served, a 404): the node that holds it, on a
	// full tier. The request is checked and waits its client's turn as
	// any (see relay).
	Relay func(key repokey.Key) http.Handler

	// beforeRun, when set (by tests), is called as a run has its slot,
	// before git starts; beforeAnswer likewise for the run of a shared
	// answer (answers.go).
	beforeRun    func(key string)
	beforeAnswer func(key string)
	// shares counts the git runs that shared answers and checks took.
	shares struct{ answers, checks atomic.Int64 }

	capsMu sync.Mutex
	caps   map[string]*flight[*capsTemplate] // by the length of object ids

	limitOnce sync.Once
	clk       clock.Clock
	clients   *clientShares
	slots     *runSlots
	tips      *recentTips // nil when TipGrace is negative
	views     *refsViews
	clientLog *clientLog // nil without Log
}

// Limits bound what a client may make the Handler do.
type Limits struct {
	// MaxRequest bounds an upload-pack request body, after gzip
	// decompression (default 8 MiB).
	MaxRequest int64
	// ReadTimeout bounds the time to read a request body (default 10s): a
	// client that trickles its body gets 408 and never holds a git process.
	ReadTimeout time.Duration
	// MaxUploadPacks caps upload-pack runs in flight (0: no cap); over it,
	// a run waits in the run queue, then 503 with Retry-After.
	MaxUploadPacks int
	// MaxPerRepo caps them per repository (0: no cap), with the same queue.
	MaxPerRepo int
	// QueueWait bounds a request's wait, in its client's line and in the
	// run queue together (0: no wait, 429 or 503 at once).
	QueueWait time.Duration
	// QueueLength bounds the requests waiting in each queue (beyond it, 429
	// or 503 at once; when a queue is full, the client with the most
	// requests in it gives up its newest to a client with fewer).
	QueueLength int
	// MaxPerClient is the share of a client address: the requests it has
	// in service at once, whether a run serves them or the cache (0: no
	// cap). Over it, a request waits its turn in the client's line (its
	// oldest first); past QueueWait it gets 429 with Retry-After. The
	// bodies of a client's waiting requests hold at most MaxPerClient
	// times MaxRequest bytes (beyond, 429 at once).
	MaxPerClient int
	// IdleTimeout bounds how long an upload-pack serving one client may go
	// without progress (default 60s, at most Timeout): git's own --timeout,
	// which git applies to protocol v0 and v1 only, and a deadline on each
	// write to the client, which stops a v2 run whose client stopped
	// reading.
	IdleTimeout time.Duration
	// TipGrace is how long a tip that a protocol v2 ref listing advertised
	// may still be fetched once the refs moved away from it, while its
	// object is on disk (default 30s; negative: none). See recentTips.
	TipGrace time.Duration
}

// Defaults of the Handler's bounds.
const (
	DefaultMaxRequest  = 8 << 20
	DefaultReadTimeout = 10 * time.Second
	DefaultIdleTimeout = time.Minute
)

// retryAfter is the Retry-After, in seconds, of a 429 or 503: a request
// that asks again joins the end of the queue it left.
const retryAfter = "2"

// Match splits a request path into the repository key and the git endpoint
// ("info/refs" or "git-upload-pack" or "git-receive-pack"). ok is false
// when the path is not a git request.
func Match(path string) (key, endpoint string, ok bool) {
	p := strings.TrimPrefix(path, "/")
	for _, ep := range []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"} {
		if strings.HasSuffix(p, ep) {
			key = strings.TrimSuffix(strings.TrimSuffix(p, ep), ".git")
			return key, ep[1:], key != ""
		}
	}
	return "", "", false
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ep, ok := Match(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	// The body's read time runs from now: it also bounds what the server
	// reads of a body left unread by a refusal before it sends the answer.
	// A request waits its turn only once its body is read: a client that
	// goes away while it waits is seen at once (the server then reads the
	// connection, and ends the request's context), and a trickling body
	// holds no share of its client.
	body := h.bodyDeadline(w, r)
	if ep == "git-receive-pack" || r.URL.Query().Get("service") == "git-receive-pack" {
		http.Error(w, "this mirror is read-only", http.StatusForbidden)
		return
	}
	if strings.Contains(r.URL.RawPath, "%") {
		http.Error(w, "percent-escapes are not allowed in a repository path", http.StatusBadRequest)
		return
	}
	k, err := h.Fold.Canonical(key) // github.com/Git/Git.git is github.com/git/git
	if err != nil {
		http.Error(w, "not a repository path: "+err.Error(), http.StatusBadRequest)
		return
	}
	key = k.String()
	gp := r.Header.Get("Git-Protocol")
	v2, err := checkProtocol(gp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var env []string
	if gp != "" {
		env = append(env, "GIT_PROTOCOL="+gp)
	}
	switch {
	case ep == "info/refs" && r.Method != http.MethodGet && r.Method != http.MethodHead,
		ep == "git-upload-pack" && r.Method != http.MethodPost:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	case ep == "info/refs" && r.URL.Query().Get("service") != "git-upload-pack":
		http.Error(w, "only smart HTTP (service=git-upload-pack) is served", http.StatusForbidden)
		return
	}
	dir, found := h.Resolve(k)
	if !found {
		if to := h.relayTo(k); to != nil {
			h.relay(w, r, key, ep, body, v2, to)
			return
		}
		http.Error(w, "repository not found", http.StatusNotFound)
		return
	}
	cmd := h.uploadPack(dir, env)
	w.Header().Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	idle := h.idleTimeout()
	if ep == "info/refs" {
		r, release, ok := h.admit(w, r, 0)
		if !ok {
			return
		}
		defer release()
		view, ok := h.view(w, r, key, dir)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		cmd.Flags = append(cmd.Flags, "--advertise-refs")
		spec := answerSpec{name: "info/refs\x00" + gp, cmd: cmd}
		switch {
		case v2:
			spec.name, spec.each = capabilities, servedCapability
			spec.render = func(t *capsTemplate, _ *refsModel) []byte { return t.v2 }
		default:
			spec.prefix = pktLine("# service=git-upload-pack\n") + "0000"
			version := ""
			if gp == "version=1" {
				version = pktLine("version 1\n")
			}
			spec.render = func(t *capsTemplate, m *refsModel) []byte {
				return append([]byte(version), m.writeAdvertisement(t.v0, t.empty)...)
			}
			spec.refs = true
		}
		h.serveAnswer(w, r, key, view, spec)
		return
	}
	data, status, err := body.read(w, r)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	req, err := parseRequest(data, v2)
	if err != nil {
		h.refuse(w, r, key, err)
		return
	}
	r, release, ok := h.admit(w, r, len(data))
	if !ok {
		return
	}
	defer release()
	view, ok := h.view(w, r, key, dir)
	if !ok {
		return
	}
	if err := req.checkIDs(view.hexLen); err != nil {
		h.refuse(w, r, key, err)
		return
	}
	if len(req.DeepenNot) > 0 {
		if err := deepenNotServed(r.Context(), h.Git, dir, req.DeepenNot); err != nil {
			h.refuse(w, r, key, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	cmd.Stdin = bytes.NewReader(data)
	if req.Command == "ls-refs" {
		name, err := packKey(dir, gp, view.state, data, v2)
		if err != nil {
			h.refuse(w, r, key, err)
			return
		}
		h.serveAnswer(w, r, key, view, answerSpec{name: name, cmd: cmd, lists: true, refs: true,
			render: func(t *capsTemplate, m *refsModel) []byte { return m.writeListing(&req, t.unborn) }})
		return
	}
	// Every fetch is checked, even one that joins a run or a kept pack
	// of the same refs: the objects can change under the same refs (a
	// prune drops what the upstream dropped), and a pack kept from before
	// would serve them again.
	if err := h.wantsServed(r.Context(), view, key, req.Wants, v2); err != nil {
		h.refuse(w, r, key, err)
		return
	}
	var noneServed bool
	if data, noneServed, err = h.servedHaves(r.Context(), view, data, req.Haves); err != nil {
		h.refuse(w, r, key, err)
		return
	}
	if noneServed && v2 && !req.Done {
		// Every have dropped: upload-pack, given none, would send the pack
		// now, where the client waits for the acknowledgments of a round.
		w.Header().Set("Content-Length", strconv.Itoa(len(noCommonHaves)))
		_, _ = io.WriteString(w, noCommonHaves)
		return
	}
	cmd.Stdin = bytes.NewReader(data)
	if h.Cache != nil && h.serveShared(w, r, key, gp, data, view, &req, v2, cmd) {
		return
	}
	pw := &lazyWriter{w: w, rc: http.NewResponseController(w), idle: idle}
	defer pw.clearDeadline()
	cmd.Stdout = pw
	_ = h.run(r.Context(), w, pw, key, cmd, view, req.Wants)
}

// uploadPack is the upload-pack of every answer, for the repository at
// dir with the environment env; an advertisement adds --advertise-refs.
func (h *Handler) uploadPack(dir string, env []string) gitcmd.Cmd {
	timeoutFlag := fmt.Sprintf("--timeout=%d", max(1, int(h.idleTimeout()/time.Second)))
	return gitcmd.Cmd{Name: "upload-pack", Args: []string{dir}, Env: env, Timeout: h.timeout(),
		Flags: []string{"--stateless-rpc", timeoutFlag},
		Config: []string{"uploadpack.allowFilter=true", "uploadpack.allowAnySHA1InWant=false", "uploadpack.hideRefs=" + hiddenRefs,
			"uploadpack.hideRefs=" + archiveRefs, "uploadpack.allowReachableSHA1InWant=true",
			// Honoured by newer gits; 2.39's advertisement is filtered (servedCapability).
			"transfer.advertiseObjectInfo=false"}}
}

// view returns what a request shares with the others that find the refs
// of dir as they are now (read once its turn came), or answers 500 when
// they cannot be read.
func (h *Handler) view(w http.ResponseWriter, r *http.Request, key, dir string) (*refsView, bool) {
	v, err := h.views.get(dir)
	if err != nil {
		h.refuse(w, r, key, err)
		return nil, false
	}
	return v, true
}

// recent says which wanted objects of a request for key are tips that its
// ref listing advertised within the grace period: nil (none) for protocol
// v0 and v1, whose upload-pack refuses an unreachable want itself, as git
// http-backend does.
func (h *Handler) recent(key string, v2 bool) func(oid string) bool {
	if !v2 || h.tips == nil {
		return nil
	}
	return func(oid string) bool { return h.tips.advertised(key, oid) }
}

func (h *Handler) timeout() time.Duration {
	if h.Timeout <= 0 {
		return 30 * time.Minute
	}
	return h.Timeout
}

func (h *Handler) idleTimeout() time.Duration {
	idle := h.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	return min(idle, h.timeout())
}

// refuse answers a request that failed its checks: the refusal's own 4xx,
// or 500 when the check itself failed (the node hears of it).
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, key string, err error) {
	if re, ok := errAs(err); ok {
		http.Error(w, re.Msg, re.Status)
		return
	}
	h.logFailure(r.Context(), key, err)
	if r.Context().Err() == nil && h.OnFailure != nil {
		h.OnFailure(key, err)
	}
	http.Error(w, "cannot check the request", http.StatusInternalServerError)
}

func (h *Handler) init() {
	h.limitOnce.Do(func() {
		clk := h.Clock
		if clk == nil {
			clk = clock.Real{}
		}
		h.clk = clk
		h.clients = &clientShares{share: h.MaxPerClient, waitQueue: waitQueue{clk: clk,
			q: fairQueue{maxLen: h.QueueLength, maxBytes: int64(h.MaxPerClient) * h.maxRequest()}}}
		h.slots = &runSlots{global: h.MaxUploadPacks, perRepo: h.MaxPerRepo, wait: h.QueueWait,
			waitQueue: waitQueue{clk: clk, q: fairQueue{maxLen: h.QueueLength}}}
		h.views = newRefsViews()
		h.clientLog = newClientLog(h.Log, clk)
		switch {
		case h.TipGrace == 0:
			h.tips = newRecentTips(clk, DefaultTipGrace)
		case h.TipGrace > 0:
			h.tips = newRecentTips(clk, h.TipGrace)
		}
	})
}

// admit takes one of the shares of the request's client once its turn
// comes, and returns the request with its turn in its context. size is
// the bytes the request holds while it waits. When no turn comes, it
// answers 429 with Retry-After (or nothing: the client went away).
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, size int) (*http.Request, func(), bool) {
	h.init()
	client := ClientAddr(r.RemoteAddr) // an IPv6 /64 is one client, as ConnLimit counts them
	t := turn{client: client, until: h.clk.Now().Add(h.QueueWait)}
	release, err := h.clients.acquire(r.Context(), client, int64(size), t.until)
	if err != nil {
		var busy *busyError
		if errors.As(err, &busy) {
			// A client over its share keeps no idle connection here.
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, busy.msg, busy.status)
		}
		return nil, nil, false
	}
	return r.WithContext(withTurn(r.Context(), t)), release, true
}

// Stats returns the counters of the queues.
func (h *Handler) Stats() QueueStats {
	h.init()
	s := h.slots.stats()
	s.Clients = h.clients.snapshot()
	return s
}

func (h *Handler) maxRequest() int64 {
	if h.MaxRequest <= 0 {
		return DefaultMaxRequest
	}
	return h.MaxRequest
}

// requestBody is a request's body under its read deadline.
type requestBody struct {
	max      int64
	rc       *http.ResponseController
	deadline bool // a read deadline is set on the connection
}

// bodyDeadline starts the read-time bound of r's body, if it has one.
func (h *Handler) bodyDeadline(w http.ResponseWriter, r *http.Request) *requestBody {
	b := &requestBody{max: h.maxRequest(), rc: http.NewResponseController(w)}
	rt := h.ReadTimeout
	if rt <= 0 {
		rt = DefaultReadTimeout
	}
	if r.ContentLength != 0 {
		// A socket deadline is wall-clock time, whatever clock the
		// Handler's logic runs on.
		b.deadline = b.rc.SetReadDeadline(time.Now().Add(rt)) == nil
	}
	return b
}

// read reads the whole request body, decompressed, within the size and
// read-time bounds. On failure it returns the status to answer.
func (b *requestBody) read(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	data, status, err := readBounded(w, r, b.max)
	if err != nil {
		// Do not wait for the rest of a bad body before answering.
		w.Header().Set("Connection", "close")
		return nil, status, err
	}
	if b.deadline {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return data, 0, nil
}

func readBounded(w http.ResponseWriter, r *http.Request, max int64) ([]byte, int, error) {
	var body io.Reader = http.MaxBytesReader(w, r.Body, max)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		gz, err := gzip.NewReader(body)
		if err != nil {
			return nil, bodyStatus(err), fmt.Errorf("bad gzip body: %w", err)
		}
		defer gz.Close()
		body = io.LimitReader(gz, max+1)
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q is not served", truncate(enc))
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, bodyStatus(err), fmt.Errorf("reading the request: %w", err)
	}
	if int64(len(data)) > max {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request larger than %d bytes once decompressed", max)
	}
	return data, 0, nil
}

// bodyStatus is the answer to a failed body read: 413 over the size bound,
// 408 past the read-time bound, 400 for anything else (bad gzip, a client
// that went away).
func bodyStatus(err error) int {
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

func (h *Handler) logFailure(ctx context.Context, key string, err error) {
	if ctx.Err() == nil && h.Log != nil {
		h.Log.Warn("upload-pack failed", "key", key, "err", err)
	}
}

// run runs cmd, the fetch of wants under view, for one client once it has
// a run slot, streaming its output to the client. A run that failed has
// had its answer; a damaged mirror's failure is told as such (damagedTip).
func (h *Handler) run(ctx context.Context, w http.ResponseWriter, pw *lazyWriter, key string, cmd gitcmd.Cmd, view *refsView,
	wants []string) error {
	release, err := h.slots.acquire(ctx, key)
	if err == nil {
		defer release()
		err = packError(damagedTip(h.Git.Run(ctx, cmd), view, wants))
	}
	if _, fault := clientFault(err); err == nil || (gitcmd.ClassOf(err) != gitcmd.ClassBadObjects && !fault) {
		pw.release() // git's own error line, if it wrote one: the client hears it as git tells it
	}
	if err == nil {
		return nil
	}
	if pw.err != nil {
		// The client stopped reading or left: not the repository's failure.
		if ctx.Err() == nil {
			client := clientOf(ctx)
			h.clientLog.log(slog.LevelInfo, client, "git client stopped reading; its upload-pack was stopped", "client", client, "key", key, "err", pw.err)
		}
	} else {
		h.runFailed(ctx, key, err)
	}
	h.failed(ctx, w, pw.started, key, err)
	return err
}

// failed answers a client whose run failed: 503 when no slot came, 400
// when git found the request at fault before any output (clientFault),
// 500 when git failed otherwise before any output, and a broken
// connection after.
func (h *Handler) failed(ctx context.Context, w http.ResponseWriter, started bool, key string, err error) {
	var busy *busyError
	if errors.As(err, &busy) {
		w.Header().Set("Retry-After", retryAfter)
		http.Error(w, busy.msg, busy.status)
		return
	}
	if ctx.Err() != nil {
		return // the client went away
	}
	if msg, fault := clientFault(err); fault && !started {
		http.Error(w, "git upload-pack refused the request: "+msg, http.StatusBadRequest)
		return
	}
	if !started {
		http.Error(w, "git upload-pack failed", http.StatusInternalServerError)
		return
	}
	// Part of the answer is out.
	breakOff(w)
}

// runFailed logs a failed run and tells OnFailure, unless it was stopped
// (its clients went away) or refused for want of a slot. A run that git
// failed for the request's fault is the client's error, not the
// repository's: it is logged as such, within the client's log limit.
func (h *Handler) runFailed(ctx context.Context, key string, err error) {
	var busy *busyError
	if errors.As(err, &busy) || ctx.Err() != nil {
		return
	}
	if msg, fault := clientFault(err); fault {
		client := clientOf(ctx)
		h.clientLog.log(slog.LevelWarn, client, "git request refused by upload-pack", "client", client, "key", key, "err", msg)
		return
	}
	h.logFailure(ctx, key, err)
	if h.OnFailure != nil {
		h.OnFailure(key, err)
	}
}

// lazyWriter notes whether any output went out, so that an upload-pack
// that fails before writing anything can still answer 500. An answer that
// begins with git's error line ("ERR ...") is held until the run ends
// (release): a damaged mirror's run then answers 500, not git's refusal.
// Each write must be done within idle: a client that stops reading fails
// the write, and git, whose output then goes nowhere, stops.
type lazyWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	idle    time.Duration
	started bool
	held    []byte // an answer that began with an error line, not sent yet
	err     error  // the first failed write to the client
}

// maxHeld bounds a held answer: git's error line and little else.
const maxHeld = 64 << 10

// A protocol v2 fetch that deepens begins its answer with the shallow
// boundary, before git has walked the history: a deepen-not that
// excludes every commit fails after it. Such an answer is held until
// its pack section begins, so that the failure can still answer 400.
var shallowInfo, packfileLine = []byte("0011shallow-info\n"), []byte("000dpackfile\n")

func (l *lazyWriter) Write(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if !l.started && (l.held != nil || isErrLine(p) || bytes.HasPrefix(p, shallowInfo)) && len(l.held)+len(p) <= maxHeld {
		l.held = append(l.held, p...)
		if bytes.HasPrefix(l.held, shallowInfo) && bytes.Contains(l.held, packfileLine) {
			l.release() // the shallow boundary was drawn: the pack follows
			if l.err != nil {
				return 0, l.err
			}
		}
		return len(p), nil
	}
	if l.held != nil {
		l.release()
		if l.err != nil {
			return 0, l.err
		}
	}
	return l.send(p)
}

// isErrLine says whether p begins with a pkt-line that carries git's error
// ("ERR <message>"), its length read as pktLines and listedTips read it.
func isErrLine(p []byte) bool {
	if len(p) < 8 || string(p[4:8]) != "ERR " {
		return false
	}
	_, err := strconv.ParseUint(string(p[:4]), 16, 16)
	return err == nil
}

// release sends what was held.
func (l *lazyWriter) release() {
	if held := l.held; held != nil && l.err == nil {
		l.held = nil
		_, _ = l.send(held)
	}
}

func (l *lazyWriter) send(p []byte) (int, error) {
	_ = l.rc.SetWriteDeadline(time.Now().Add(l.idle))
	l.started = true
	n, err := l.w.Write(p)
	if err == nil {
		if ferr := l.rc.Flush(); !errors.Is(ferr, http.ErrNotSupported) {
			err = ferr
		}
	}
	if err != nil {
		l.err = err
	}
	return n, err
}

// clearDeadline lifts the write deadline, which would otherwise outlive
// the request on a connection kept alive for the client's next one.
func (l *lazyWriter) clearDeadline() { _ = l.rc.SetWriteDeadline(time.Time{}) }

func pktLine(s string) string {
	const hex = "0123456789abcdef"
	n := len(s) + 4
	return string([]byte{hex[n>>12&0xf], hex[n>>8&0xf], hex[n>>4&0xf], hex[n&0xf]}) + s
}

// RefuseEncodedSeparators answers 400 to a request whose path spells a
// separator, a NUL or a dot with a percent-escape (%2F, %5C, %00, %2E), or
// has "." or ".." segments, before next (a ServeMux would otherwise
// redirect it to another path, or route it under a key it does not name).
func RefuseEncodedSeparators(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := badPath(r.URL); why != "" {
			http.Error(w, "bad request path: "+why, http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func badPath(u *url.URL) string {
	if raw := u.RawPath; raw != "" {
		low := strings.ToLower(raw)
		for _, esc := range []string{"%2f", "%5c", "%00", "%2e"} {
			if strings.Contains(low, esc) {
				return "an encoded separator, NUL or dot (" + strings.ToUpper(esc) + ")"
			}
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "a '.' or '..' segment"
		}
	}
	if strings.ContainsAny(u.Path, "\x00\\") {
		return "a NUL or a backslash"
	}
	return ""
}
