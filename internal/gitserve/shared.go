package gitserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// serveShared serves a fetch, whose wants were checked, through the pack
// cache: from the live run or the kept output of an identical request, or
// from a new run that the identical requests after it follow. view is the
// state of the refs that the request found, wants what it asked for. It
// returns false when the cache cannot take the request (its directory
// fails): the caller then serves it alone.
func (h *Handler) serveShared(w http.ResponseWriter, r *http.Request, key, gitProtocol string, body []byte, view *refsView,
	req *uploadRequest, v2 bool, cmd gitcmd.Cmd) bool {
	wants := req.Wants
	dir := cmd.Args[0]
	ck, err := packKey(dir, gitProtocol, view.state, body, v2)
	if err != nil {
		h.logCache(key, err)
		return false
	}
	rd := h.Cache.join(ck)
	if rd == nil {
		// The run outlives the request that started it, until the last
		// of its clients leaves.
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		var leader bool
		if rd, leader, err = h.Cache.start(ck, likelyShared(req), cancel); err != nil {
			cancel()
			h.logCache(key, err)
			return false
		}
		if leader {
			go h.sharedRun(ctx, cancel, rd.e, key, view, wants, cmd)
		} else {
			cancel()
		}
	}
	h.follow(r.Context(), w, r, key, rd)
	return true
}

// likelyShared says whether the answer to req is likely to be asked for
// again, and is worth keeping even if nobody else asks for it now: a
// clone's, whole and full. A filtered or shallow clone, or a fetch that
// has objects already, is kept only when asked for again soon (see
// PackCache.start).
func likelyShared(req *uploadRequest) bool {
	return req.Filter == "" && len(req.Haves) == 0 && !req.deepen && !req.since && len(req.DeepenNot) == 0 && req.shallows == 0
}

// sharedRun runs one upload-pack of wants for every client of e and keeps
// its output, unless it failed, the refs moved from view while it ran, or
// its pack is not whole (checkKept: an answer is checked once, before it
// is kept, so that a corrupt one is never replayed). The run's clients
// have every byte by then; their answers end when the check does.
func (h *Handler) sharedRun(ctx context.Context, cancel context.CancelFunc, e *packEntry, key string, view *refsView, wants []string,
	cmd gitcmd.Cmd) {
	defer cancel()
	cmd.Stdout = e
	release, err := h.slots.acquire(ctx, key)
	if err == nil {
		if h.beforeRun != nil {
			h.beforeRun(key)
		}
		err = h.Git.Run(ctx, cmd)
		release()
	}
	keep := false
	if err == nil {
		after, serr := readRefs(cmd.Args[0])
		keep = serr == nil && bytes.Equal(after.digest, view.state)
		if path, ok := e.keepable(); keep && ok {
			err = checkKept(path)
		}
	} else {
		err = packError(damagedTip(err, view, wants))
	}
	if err != nil {
		keep = false
		h.runFailed(ctx, key, err)
	}
	e.finish(err, keep)
}

// checkKept checks the answer of a run in the file at path before it is
// kept (checkAnswer): one that fails is of a damaged mirror, whose packed
// data git copied out as it found it. Its clients, still following the
// run, are broken off, and the node hears of it as of any failure on a
// mirror's objects.
func checkKept(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", errCacheFile, err)
	}
	defer f.Close()
	if err := checkAnswer(f); err != nil {
		return &gitcmd.Error{Args: []string{"upload-pack"}, Class: gitcmd.ClassBadObjects,
			Stderr: "the answer's pack is corrupt (its objects do not inflate whole): the mirror is damaged: " + err.Error()}
	}
	return nil
}

// follow streams a run's output to one client, from the first byte, as it
// comes. A run that fails before any output answers 500 (503 when it got
// no slot); after, the connection is broken off.
//
// The answer is framed so that its bytes go from the cache's file to the
// socket by sendfile (see send): chunked framing would have net/http copy
// them. An answer that is whole on file within framingWait (a kept one,
// or a small one) goes with a Content-Length, and the connection stays
// open for the client's next request; a larger one, still being made, goes
// as a body that the end of the connection delimits (HTTP/1.1's
// "Transfer-Encoding: identity"). Its client tells a cut-off answer by
// git's own framing (the flush that ends a response, the pack's checksum)
// and by the reset that breaks it off (breakOff).
func (h *Handler) follow(ctx context.Context, w http.ResponseWriter, r *http.Request, key string, rd *packReader) {
	defer rd.close()
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection may serve the client's next request
	size, whole, err := rd.settle(ctx, framingBytes, framingWait)
	if err != nil {
		h.failed(ctx, w, false, key, err)
		return
	}
	switch {
	case whole:
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	case r.ProtoMajor == 1 && r.ProtoMinor >= 1:
		w.Header().Set("Transfer-Encoding", "identity")
	}
	started := false
	for {
		p, err := rd.next(ctx)
		if err == io.EOF {
			return
		}
		if err != nil {
			h.failed(ctx, w, started, key, err)
			return
		}
		started = true
		if err := send(w, rc, p); err != nil {
			if errors.Is(err, errCacheFile) {
				h.logCache(key, err)
				breakOff(w)
			}
			return // else the client went away; the others go on
		}
	}
}

// An answer whose run ends within framingWait, with fewer than
// framingBytes, is sent whole with its length (see follow).
const (
	framingBytes = 1 << 20
	framingWait  = time.Second
)

// send writes one part of an answer. A range of the cache's file goes by
// io.Copy to the response writer, whose ReadFrom hands an unframed body to
// the socket's ReadFrom: sendfile on plain TCP (TLS, and chunked framing,
// copy it). The write deadline moves with progress: a client that takes
// nothing for writeStall is cut off, rather than hold the run (which, once
// it spilled, goes at the pace of its slowest client) and its slot for
// ever.
func send(w http.ResponseWriter, rc *http.ResponseController, p part) error {
	if p.f == nil {
		_ = rc.SetWriteDeadline(time.Now().Add(writeStall))
		if _, err := w.Write(p.mem); err != nil {
			return err
		}
		_ = rc.Flush() // a client gone fails the next write
		return nil
	}
	if _, err := p.f.Seek(p.off, io.SeekStart); err != nil {
		return fmt.Errorf("%w: %w", errCacheFile, err)
	}
	for left := p.n; left > 0; {
		_ = rc.SetWriteDeadline(time.Now().Add(writeStall))
		n, err := io.Copy(w, io.LimitReader(p.f, left))
		left -= n
		switch {
		case err == nil && n == 0:
			return fmt.Errorf("%w: %s ends %d bytes short", errCacheFile, p.f.Name(), left)
		case err != nil && (n == 0 || !errors.Is(err, os.ErrDeadlineExceeded)):
			return err
		}
	}
	_ = rc.Flush() // what a short part left in net/http's buffer
	return nil
}

// errCacheFile is a failure of the cache's file while it is sent, not of
// the client.
var errCacheFile = errors.New("pack cache: the answer's file failed")

// breakOff ends a response whose answer failed after part of it went out,
// so that its client sees a broken answer rather than a short one that
// looks whole: with a reset of the connection (a body that the
// connection's end delimits would end well with a close), or, where the
// connection cannot be taken over, with net/http's abort.
func breakOff(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	for {
		inner, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = inner.NetConn()
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // the close resets the connection
	}
	_ = conn.Close()
}

// writeStall is how long a write to a client of a shared run may wait.
const writeStall = time.Minute

func (h *Handler) logCache(key string, err error) {
	if h.Log != nil {
		h.Log.Warn("pack cache: serving without it", "key", key, "err", err)
	}
}
