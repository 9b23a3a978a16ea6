package gitserve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// serveShared serves a fetch, whose wants were checked, through the pack
// cache: from the live run or the kept output of an identical request, or
// from a new run that the identical requests after it follow. state is the
// digest of the refs that the request found. It returns false when the
// cache cannot take the request (its directory fails): the caller then
// serves it alone.
func (h *Handler) serveShared(w http.ResponseWriter, r *http.Request, key, gitProtocol string, body, state []byte, v2 bool,
	cmd gitcmd.Cmd) bool {
	dir := cmd.Args[0]
	ck, err := packKey(dir, gitProtocol, state, body, v2)
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
		if rd, leader, err = h.Cache.start(ck, cancel); err != nil {
			cancel()
			h.logCache(key, err)
			return false
		}
		if leader {
			go h.sharedRun(ctx, cancel, rd.e, key, state, cmd)
		} else {
			cancel()
		}
	}
	h.follow(r.Context(), w, key, rd)
	return true
}

// sharedRun runs one upload-pack for every client of e and keeps its
// output, unless it failed or the refs moved while it ran.
func (h *Handler) sharedRun(ctx context.Context, cancel context.CancelFunc, e *packEntry, key string, state []byte, cmd gitcmd.Cmd) {
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
		keep = serr == nil && bytes.Equal(after.digest, state)
	} else {
		h.runFailed(ctx, key, err)
	}
	e.finish(err, keep)
}

// follow streams a run's output to one client, from the first byte, as it
// comes. A run that fails before any output answers 500 (503 when it got
// no slot); after, the connection is broken off.
func (h *Handler) follow(ctx context.Context, w http.ResponseWriter, key string, rd *packReader) {
	defer rd.close()
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection may serve the client's next request
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
		// A client that stops reading is cut off after writeStall, rather
		// than hold the run (which, once it spilled, goes at the pace of
		// its slowest client) and its slot for ever.
		_ = rc.SetWriteDeadline(time.Now().Add(writeStall))
		if _, err := w.Write(p); err != nil {
			return // the client went away; the others go on
		}
		_ = rc.Flush() // a client gone fails the next write
	}
}

// writeStall is how long a write to a client of a shared run may wait.
const writeStall = time.Minute

func (h *Handler) logCache(key string, err error) {
	if h.Log != nil {
		h.Log.Warn("pack cache: serving without it", "key", key, "err", err)
	}
}
