package gitserve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// An answer that the requests finding the refs in one state share: the
// refs advertisement of info/refs (protocol v0 and v1) or the capabilities
// (v2), and each distinct ls-refs listing. Plain git runs an upload-pack
// for each; here the first request that needs one runs it and the others
// get its output.
type answerSpec struct {
	name   string     // the answer's key in the view
	cmd    gitcmd.Cmd // the upload-pack that makes it
	prefix string     // written before it (v0's service line)
	// each filters the answer's pkt-lines (nil: all are passed on).
	each func(pkt []byte) bool
	// lists says that the answer is an ls-refs listing, whose tips are
	// recorded as advertised each time it is served (see recentTips).
	lists bool
}

// serveAnswer answers from the shared answer of spec, made if no request
// made it yet. The answer is whole before its first byte goes out: it goes
// with a Content-Length, and the connection stays open for the client's
// next request.
func (h *Handler) serveAnswer(w http.ResponseWriter, r *http.Request, key string, v *refsView, spec answerSpec) {
	ctx := r.Context()
	a, err := v.answer(ctx, spec.name, func() (sharedAnswer, bool, error) { return h.makeAnswer(ctx, key, v, spec) })
	if err != nil {
		h.failed(ctx, w, false, key, err)
		return
	}
	if spec.lists && h.tips != nil {
		// Before the client can have read the listing and asked for a tip.
		h.tips.record(key, a.tips)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(spec.prefix)+len(a.body)))
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(h.idleTimeout()))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection may serve the client's next request
	if _, err := io.WriteString(w, spec.prefix); err == nil {
		_, _ = w.Write(a.body)
	}
}

// makeAnswer runs the upload-pack of spec for every request that waits for
// it: the run goes on if the request that started it leaves. keep is false
// when the refs moved while it ran: its answer then serves the requests
// that waited for it (it is as new as theirs), not later ones.
func (h *Handler) makeAnswer(ctx context.Context, key string, v *refsView, spec answerSpec) (a sharedAnswer, keep bool, err error) {
	ctx = context.WithoutCancel(ctx)
	var buf bytes.Buffer
	cmd := spec.cmd
	cmd.Stdout = &buf
	var pw *pktWriter
	if spec.each != nil {
		pw = &pktWriter{w: &buf, each: spec.each}
		cmd.Stdout = pw
	}
	release, err := h.slots.acquire(ctx, key)
	if err == nil {
		if h.beforeAnswer != nil {
			h.beforeAnswer(key)
		}
		h.shares.answers.Add(1)
		err = h.Git.Run(ctx, cmd)
		release()
	}
	if err == nil && pw != nil {
		err = pw.rest()
	}
	if err != nil {
		h.runFailed(ctx, key, err)
		return sharedAnswer{}, false, err
	}
	a.body = buf.Bytes()
	if spec.lists {
		a.tips = listedTips(a.body)
	}
	after, err := readRefs(v.dir)
	return a, err == nil && bytes.Equal(after.digest, v.state), nil
}

// listedTips returns the object ids of an ls-refs listing's lines
// ("<oid> <refname>[ <attributes>]"), up to maxTipsPerRepo.
func listedTips(body []byte) []string {
	var oids []string
	for len(body) >= 4 && len(oids) < maxTipsPerRepo {
		n, err := strconv.ParseUint(string(body[:4]), 16, 16)
		if err != nil || int(n) > len(body) {
			break
		}
		if n < 4 { // flush, delimiter, response end
			body = body[4:]
			continue
		}
		if oid, _, ok := bytes.Cut(body[4:n], []byte(" ")); ok && gitcmd.IsOID(string(oid)) {
			oids = append(oids, string(oid))
		}
		body = body[n:]
	}
	return oids
}
