package gitserve

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"
)

// relayServer serves, for each request, the entry of the pack cache key
// named by its path, as a fetch that joined it does.
func relayServer(t *testing.T, c *PackCache) *httptest.Server {
	h := &Handler{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := c.join(r.URL.Path)
		if rd == nil {
			http.NotFound(w, r)
			return
		}
		h.follow(r.Context(), w, r, r.URL.Path, rd)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A kept answer goes with its length, on a connection that stays open; a
// large one still being made goes unframed, to the end of a connection
// that is then closed, and a failure after its start breaks it off: its
// client sees an error, not a short answer that looks whole.
func TestAnAnswerIsFramedForSendfileAndBrokenOffWhenItsRunFails(t *testing.T) {
	c, err := NewPackCache(filepath.Join(t.TempDir(), "packcache"), CacheConfig{MaxBytes: 1 << 30, TTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := relayServer(t, c)
	data := bytes.Repeat([]byte("0123456789abcdef"), 3*framingBytes/16)

	kept, _, err := c.start("/kept", true, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.e.Write(data[:100000]); err != nil {
		t.Fatal(err)
	}
	kept.e.finish(nil, true)
	kept.close()
	resp, err := srv.Client().Get(srv.URL + "/kept")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, data[:100000]) {
		t.Fatalf("the kept answer: %d bytes, %v", len(body), err)
	}
	if resp.ContentLength != 100000 || resp.Close {
		t.Fatalf("the kept answer: Content-Length %d, close %v; want 100000 on a connection kept open", resp.ContentLength, resp.Close)
	}

	live, _, err := c.start("/live", true, func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()
	if _, err := live.e.Write(data[:2*framingBytes]); err != nil {
		t.Fatal(err)
	}
	resp, err = srv.Client().Get(srv.URL + "/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != -1 || len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Fatalf("the live answer: %s, Content-Length %d, Transfer-Encoding %q, close %v; want 200, unframed, to the connection's end",
			resp.Status, resp.ContentLength, resp.TransferEncoding, resp.Close)
	}
	got := make([]byte, 2*framingBytes)
	if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, data[:2*framingBytes]) {
		t.Fatalf("the live answer's first bytes: %v", err)
	}
	live.e.finish(errors.New("the disk failed under the run"), false)
	if rest, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("the client of a run that failed read %d more bytes and a clean end", len(rest))
	}
}
