package gittest

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// EndlessPack answers every git fetch (a protocol v2 "command=fetch"
// request) with a pack that never ends: a valid pack header announcing
// endlessObjects blobs of endlessBlobSize bytes each, sent one after the
// other until the client hangs up. Everything else (the capability
// advertisement, ls-refs) is left to inner, so a client sees real refs
// and then asks for them. Sent counts the bytes of packs that reached the
// connection; Fetches, the fetches answered; Done, those whose client hung
// up. It is what a hostile source does to fill its client's disk.
type EndlessPack struct {
	URL     string // with StartEndless: http://127.0.0.1:PORT
	inner   http.Handler
	srv     *http.Server
	Sent    atomic.Int64
	Fetches atomic.Int64
	Done    atomic.Int64
}

const (
	// endlessObjects is what the pack header announces: 100 GiB in all, as
	// good as endless for a test, and few enough that index-pack's table of
	// objects (allocated up front from this count) stays small.
	endlessObjects  = 100_000
	endlessBlobSize = 1 << 20
)

// NewEndlessPack serves inner, but answers fetches with an endless pack.
func NewEndlessPack(inner http.Handler) *EndlessPack { return &EndlessPack{inner: inner} }

// StartEndless serves u's repositories on another port of 127.0.0.1,
// answering every fetch with an endless pack.
func (u *Upstreams) StartEndless() (*EndlessPack, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := NewEndlessPack(u.srv.Handler)
	e.URL, e.srv = "http://"+ln.Addr().String(), &http.Server{Handler: e}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// RepoURL is the clone URL of name on the endless server.
func (e *EndlessPack) RepoURL(name string) string { return e.URL + "/" + name + ".git" }

// Close stops the server that StartEndless started.
func (e *EndlessPack) Close() {
	if e.srv != nil {
		_ = e.srv.Close()
	}
}

func (e *EndlessPack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lines, ok := readFetch(w, r, e.inner)
	if !ok {
		return
	}
	e.Fetches.Add(1)
	defer e.Done.Add(1)
	pw := &pktWriter{w: w, sent: &e.Sent}
	pack := startPack(w, pw, lines)
	hdr := make([]byte, 12)
	copy(hdr, "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], endlessObjects)
	pack.Write(hdr)
	blob := make([]byte, endlessBlobSize)
	for i := uint64(0); i < endlessObjects && pw.err == nil; i++ {
		binary.BigEndian.PutUint64(blob, i) // a different object each time
		pack.Write(objectHeader(3, len(blob)))
		zw, _ := zlib.NewWriterLevel(pack, zlib.NoCompression) // stays as large on disk as on the wire
		_, _ = zw.Write(blob)
		_ = zw.Close()
	}
}

// readFetch reads a request to a git server: a protocol v2 fetch
// (a POST to git-upload-pack with "command=fetch") gives its pkt-lines and
// true, to be answered by the caller; anything else is handed to inner
// (or refused when unreadable), and gives false.
func readFetch(w http.ResponseWriter, r *http.Request, inner http.Handler) (map[string]bool, bool) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
		inner.ServeHTTP(w, r)
		return nil, false
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	body := raw
	if enc := r.Header.Get("Content-Encoding"); enc == "gzip" || enc == "x-gzip" {
		gz, err := gzip.NewReader(bytes.NewReader(raw))
		if err == nil {
			body, err = io.ReadAll(io.LimitReader(gz, 64<<20))
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return nil, false
		}
	}
	lines := pktLines(body)
	if !lines["command=fetch"] {
		r.Body = io.NopCloser(bytes.NewReader(raw))
		inner.ServeHTTP(w, r)
		return nil, false
	}
	return lines, true
}

// startPack answers the fetch whose pkt-lines are lines up to its pack
// (acknowledgments when the client sent what it has, then the packfile
// section), and returns the writer of the pack's bytes.
func startPack(w http.ResponseWriter, pw *pktWriter, lines map[string]bool) *sideband {
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	if !lines["done"] {
		// The client sent what it has: say that the pack follows.
		pw.line("acknowledgments\n")
		pw.line("NAK\n")
		pw.line("ready\n")
		pw.raw([]byte("0001"))
	}
	pw.line("packfile\n")
	return &sideband{pw: pw}
}

// pktLines is the set of the data lines of a pkt-line stream, without
// their line feeds.
func pktLines(b []byte) map[string]bool {
	out := map[string]bool{}
	for len(b) >= 4 {
		n, err := strconv.ParseUint(string(b[:4]), 16, 16)
		if err != nil {
			break
		}
		if n < 4 { // flush, delim, response end
			b = b[4:]
			continue
		}
		if int(n) > len(b) {
			break
		}
		out[strings.TrimSuffix(string(b[4:n]), "\n")] = true
		b = b[n:]
	}
	return out
}

// objectHeader is a pack entry's header: its type and inflated size.
func objectHeader(typ byte, size int) []byte {
	b := []byte{typ<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}

// pktWriter writes pkt-lines, counting what reached the connection.
type pktWriter struct {
	w    http.ResponseWriter
	sent *atomic.Int64
	err  error
}

func (p *pktWriter) raw(b []byte) {
	if p.err != nil {
		return
	}
	n, err := p.w.Write(b)
	p.sent.Add(int64(n))
	p.err = err
}

func (p *pktWriter) line(s string) { p.raw(fmt.Appendf(nil, "%04x%s", len(s)+4, s)) }

// sideband wraps what is written into band 1 packets of at most 65520
// bytes, flushed as they go.
type sideband struct {
	pw  *pktWriter
	buf []byte
}

func (s *sideband) Write(b []byte) (int, error) {
	const max = 65520 - 5
	n := len(b)
	for len(b) > 0 && s.pw.err == nil {
		c := min(len(b), max)
		s.pw.raw(append(fmt.Appendf(s.buf[:0], "%04x\x01", c+5), b[:c]...))
		b = b[c:]
	}
	if s.pw.err != nil {
		return 0, s.pw.err
	}
	if f, ok := s.pw.w.(http.Flusher); ok {
		f.Flush()
	}
	return n, nil
}
