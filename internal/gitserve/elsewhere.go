package gitserve

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// relayTo is the handler Relay gives for key, or nil.
func (h *Handler) relayTo(key repokey.Key) http.Handler {
	if h.Relay == nil {
		return nil
	}
	return h.Relay(key)
}

// relay serves a request for key (endpoint ep) that this Handler does not
// hold through to, the holder's relay. It is checked as a request served
// here is, up to what needs the refs (the holder checks the wants): the
// upload-pack body read whole within its bounds (gzip undone) and parsed;
// then it waits its client's turn in the fair queue and holds that share
// while the answer streams. It takes no upload-pack slot: no git runs
// here. Each write to the client has the idle bound, so that a client
// that stops reading frees its share. The body read can be read again
// (GetBody): the relay may pass a replica over for the next.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, key, ep string, body *requestBody, v2 bool, to http.Handler) {
	var data []byte
	if ep == "git-upload-pack" {
		var status int
		var err error
		if data, status, err = body.read(w, r); err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		if _, err := parseRequest(data, v2); err != nil {
			h.refuse(w, r, key, err)
			return
		}
	}
	r, release, ok := h.admit(w, r, len(data))
	if !ok {
		return
	}
	defer release()
	if data != nil {
		r = r.Clone(r.Context())
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil } // for the next replica
		r.Header.Del("Content-Encoding")
		r.Header.Set("Content-Length", strconv.Itoa(len(data)))
	}
	iw := &idleWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: h.idleTimeout()}
	defer iw.clear()
	to.ServeHTTP(iw, r)
}

// idleWriter bounds each write to the client by the idle timeout.
type idleWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	idle     time.Duration
	deadline bool
}

func (w *idleWriter) Write(p []byte) (int, error) {
	// A socket deadline is wall-clock time, whatever clock the Handler's
	// logic runs on.
	w.deadline = w.rc.SetWriteDeadline(time.Now().Add(w.idle)) == nil || w.deadline
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (the relay's flushes) reach the
// connection.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *idleWriter) clear() {
	if w.deadline {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}
