package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/testnet"
	"github.com/hashicorp/yamux"
)

const (
	testNode  = 7
	goodProof = "c0ffee"
)

func allowGoodProof(nodeID uint32, proof string) error {
	if proof != goodProof {
		return fmt.Errorf("bad token for node %d", nodeID)
	}
	return nil
}

// startServer runs a tunnel Server on addr ("127.0.0.1:0" for any port)
// until the returned stop is called or the test ends.
func startServer(t testing.TB, addr string, tlsConf *tls.Config) (srv *Server, tunnelAddr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv = NewServer(allowGoodProof, nil, tlsConf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Server.Serve returned %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, ln.Addr().String(), stop
}

// startClient runs the partial node's Serve until the returned stop is
// called or the test ends.
func startClient(t testing.TB, cfg ClientConfig, h http.Handler) (stop func()) {
	t.Helper()
	if cfg.NodeID == 0 {
		cfg.NodeID = testNode
	}
	if cfg.Proof == "" {
		cfg.Proof = goodProof
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("client Serve returned %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds, failing the test after a minute: the
// deadline only bounds a failure, and a busy machine may need much of it.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reply(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })
}

// get fetches url with a client on transport and returns the body.
func get(transport http.RoundTripper, url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s: %s", resp.Status, b)
	}
	return string(b), nil
}

func nodeURL(nodeID uint32, path string) string { return fmt.Sprintf("http://node-%d%s", nodeID, path) }

// syncBuffer is a log sink that tests can read while clients write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Contains(b.buf.String(), s)
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestReverseProxyStreamsLargeBodiesBothWays(t *testing.T) {
	const size = 20 << 20
	upload, download := randomBytes(size, 1), randomBytes(size, 2)
	var gotPath, gotQuery string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.Path, r.URL.RawQuery
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Upload-Size", fmt.Sprint(n))
		w.Header().Set("X-Upload-Sha256", hex.EncodeToString(h.Sum(nil)))
		w.Write(download)
	})
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	startClient(t, ClientConfig{Addr: addr}, handler)
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })

	proxy := httptest.NewServer(srv.ReverseProxy())
	defer proxy.Close()
	url := proxy.URL + "/7/github.com/a/b.git/git-upload-pack?service=git-upload-pack"
	resp, err := http.Post(url, "application/x-git-upload-pack-request", bytes.NewReader(upload))
	if err != nil {
		t.Fatalf("POST through the reverse proxy: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s: %.200s", resp.Status, body)
	}
	if gotPath != "/github.com/a/b.git/git-upload-pack" || gotQuery != "service=git-upload-pack" {
		t.Errorf("handler saw path %q query %q; want the path without the node prefix and the query intact", gotPath, gotQuery)
	}
	if n, s := resp.Header.Get("X-Upload-Size"), resp.Header.Get("X-Upload-Sha256"); n != fmt.Sprint(size) || s != sum(upload) {
		t.Errorf("upload arrived as %s bytes sha256 %s; want %d bytes sha256 %s", n, s, size, sum(upload))
	}
	if len(body) != size || sum(body) != sum(download) {
		t.Errorf("download arrived as %d bytes sha256 %s; want %d bytes sha256 %s", len(body), sum(body), size, sum(download))
	}
}

func TestReverseProxyRejectsPathsWithoutANodeID(t *testing.T) {
	srv := NewServer(allowGoodProof, nil, nil)
	for _, path := range []string{"/", "/7", "/seven/a.git", "/-1/a.git", "/4294967296/a.git"} {
		rec := httptest.NewRecorder()
		srv.ReverseProxy().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, rec.Code)
		}
	}
}

func TestWrongProofIsRefusedWithTheServersMessage(t *testing.T) {
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)

	cfg, err := ClientConfig{Addr: addr, NodeID: testNode, Proof: "bad0"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	sess, err := connect(context.Background(), cfg, cfg.Logger)
	if err == nil {
		sess.Close()
		t.Fatal("connect with a wrong proof succeeded")
	}
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "bad token for node 7") {
		t.Fatalf("connect error = %v; want a refusal carrying the server's message", err)
	}

	// The long-running client logs the refusal and keeps trying.
	logs := &syncBuffer{}
	startClient(t, ClientConfig{
		Addr: addr, Proof: "bad0", Logger: slog.New(slog.NewTextHandler(logs, nil)),
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
	}, reply("never"))
	waitFor(t, "the refusal is logged with the server's message", func() bool {
		return logs.Contains("bad token for node 7")
	})
	if srv.Connected(testNode) {
		t.Fatal("node with a wrong proof is connected")
	}
}

func TestClientStartedBeforeTheServerConnectsWhenItAppears(t *testing.T) {
	// A free port, so that the first dials are refused.
	addr := testnet.Addr(t)

	logs := &syncBuffer{}
	startClient(t, ClientConfig{Addr: addr, Logger: slog.New(slog.NewTextHandler(logs, nil))}, reply("hello"))
	waitFor(t, "a dial has failed", func() bool { return logs.Contains("tunnel connect failed") })

	srv, _, _ := startServer(t, addr, nil)
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	if got, err := get(srv.Transport(), nodeURL(testNode, "/")); err != nil || got != "hello" {
		t.Fatalf("GET = %q, %v; want \"hello\"", got, err)
	}
}

func TestClientReconnectsAfterTheServerRestarts(t *testing.T) {
	srv1, addr, stop1 := startServer(t, "127.0.0.1:0", nil)
	startClient(t, ClientConfig{Addr: addr}, reply("hello"))
	waitFor(t, "node 7 is connected to the first server", func() bool { return srv1.Connected(testNode) })

	stop1()
	if srv1.Connected(testNode) || len(srv1.Nodes()) != 0 {
		t.Fatalf("stopped server still lists nodes %v", srv1.Nodes())
	}

	srv2, _, _ := startServer(t, addr, nil)
	waitFor(t, "node 7 is connected to the restarted server", func() bool { return srv2.Connected(testNode) })
	if got, err := get(srv2.Transport(), nodeURL(testNode, "/")); err != nil || got != "hello" {
		t.Fatalf("GET after restart = %q, %v; want \"hello\"", got, err)
	}
}

func TestSecondClientWithTheSameIDReplacesTheFirst(t *testing.T) {
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	// The first client's clock never moves, so once replaced it stays
	// away and cannot take the ID back during the test.
	frozen := clock.NewFake(time.Unix(0, 0))
	firstLogs := &syncBuffer{}
	startClient(t, ClientConfig{Addr: addr, Clock: frozen, Logger: slog.New(slog.NewTextHandler(firstLogs, nil))}, reply("first"))
	waitFor(t, "the first client answers", func() bool {
		got, _ := get(srv.Transport(), nodeURL(testNode, "/"))
		return got == "first"
	})

	startClient(t, ClientConfig{Addr: addr}, reply("second"))
	waitFor(t, "the second client answers", func() bool {
		got, _ := get(srv.Transport(), nodeURL(testNode, "/"))
		return got == "second"
	})
	waitFor(t, "the first client sees its tunnel closed", func() bool { return firstLogs.Contains("tunnel down") })
	for range 5 {
		if got, err := get(srv.Transport(), nodeURL(testNode, "/")); err != nil || got != "second" {
			t.Fatalf("GET after replacement = %q, %v; want \"second\" every time", got, err)
		}
	}
	if nodes := srv.Nodes(); !slices.Equal(nodes, []uint32{testNode}) {
		t.Fatalf("Nodes() = %v, want [7]", nodes)
	}
}

func TestDialNodeForAnUnknownNodeErrorsClearly(t *testing.T) {
	srv := NewServer(allowGoodProof, nil, nil)
	_, err := srv.DialNode(context.Background(), 42)
	if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "node 42") {
		t.Fatalf("DialNode(42) = %v; want ErrNotConnected naming node 42", err)
	}
}

func TestRequestsToADisconnectedNodeFailWithoutHanging(t *testing.T) {
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	stopClient := startClient(t, ClientConfig{Addr: addr}, reply("hello"))
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	// Leave an idle pooled stream behind, as a real fetch would.
	if _, err := get(srv.Transport(), nodeURL(testNode, "/")); err != nil {
		t.Fatalf("GET while connected: %v", err)
	}

	stopClient()
	waitFor(t, "node 7 is disconnected", func() bool { return !srv.Connected(testNode) })

	// get has a 10 s deadline: an error other than that deadline means no hang.
	_, err := get(srv.Transport(), nodeURL(testNode, "/"))
	if !errors.Is(err, ErrNotConnected) {
		t.Fatalf("GET through Transport = %v; want ErrNotConnected", err)
	}
	proxy := httptest.NewServer(srv.ReverseProxy())
	defer proxy.Close()
	_, err = get(http.DefaultTransport, proxy.URL+"/7/a.git/info/refs")
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "node 7") {
		t.Fatalf("GET through ReverseProxy = %v; want a 503 naming node 7", err)
	}
}

func TestTunnelOverTLS(t *testing.T) {
	// httptest's certificate is valid for 127.0.0.1.
	certServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer certServer.Close()
	serverConf := certServer.TLS.Clone()
	clientConf := certServer.Client().Transport.(*http.Transport).TLSClientConfig.Clone()

	srv, addr, _ := startServer(t, "127.0.0.1:0", serverConf)
	startClient(t, ClientConfig{Addr: addr, TLS: clientConf}, reply("secret"))
	waitFor(t, "node 7 is connected over TLS", func() bool { return srv.Connected(testNode) })
	if got, err := get(srv.Transport(), nodeURL(testNode, "/")); err != nil || got != "secret" {
		t.Fatalf("GET over TLS = %q, %v; want \"secret\"", got, err)
	}
}

func TestClientConfigErrorsReturnAtOnce(t *testing.T) {
	tests := []struct {
		name string
		cfg  ClientConfig
		want string
	}{
		{name: "no address", cfg: ClientConfig{Proof: goodProof}, want: "no full node address"},
		{name: "no proof", cfg: ClientConfig{Addr: "127.0.0.1:1"}, want: "empty proof"},
		{name: "proof with a space would break the hello line", cfg: ClientConfig{Addr: "127.0.0.1:1", Proof: "ab cd"}, want: "not a hex string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Serve(context.Background(), tt.cfg, reply(""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Serve = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func BenchmarkTransfer64MiB(b *testing.B) {
	size := benchsize.Of(64<<20, 4<<20)
	chunk := randomBytes(1<<20, 3)
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		for range size / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv, addr, _ := startServer(b, "127.0.0.1:0", nil)
	startClient(b, ClientConfig{Addr: addr}, handler)
	waitFor(b, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	proxy := httptest.NewServer(srv.ReverseProxy())
	defer proxy.Close()

	for _, bc := range []struct {
		name      string
		transport http.RoundTripper
		url       string
	}{
		{name: "transport", transport: srv.Transport(), url: nodeURL(testNode, "/pack")},
		{name: "reverse-proxy", transport: http.DefaultTransport, url: proxy.URL + "/7/pack"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			client := &http.Client{Transport: bc.transport}
			for b.Loop() {
				resp, err := client.Get(bc.url)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != int64(size) {
					b.Fatalf("read %d bytes, %v; want %d", n, err, size)
				}
			}
		})
	}
}

func TestClientRedialsAfterTheTunnelIsReset(t *testing.T) {
	// A bare full node that admits the client and then resets the TCP
	// connection: the client must notice and dial again.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	startClient(t, ClientConfig{Addr: ln.Addr().String()}, reply("hello"))
	for i := range 2 {
		conn, err := ln.Accept()
		if err != nil {
			t.Fatalf("accept %d: %v", i, err)
		}
		line, err := readLine(conn)
		if err != nil || !strings.HasPrefix(line, "GITFLEET-TUNNEL 1 7 ") {
			t.Fatalf("hello %d = %q, %v", i, line, err)
		}
		io.WriteString(conn, "OK\n")
		conn.(*net.TCPConn).SetLinger(0) // Close sends RST
		conn.Close()
	}
}

// timedOutConn fails every read the way a TCP connection to a vanished
// peer does: with ETIMEDOUT, which net.Error reports as temporary.
type timedOutConn struct{}

func (timedOutConn) Read([]byte) (int, error) {
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}
}
func (timedOutConn) Write(p []byte) (int, error) { return len(p), nil }
func (timedOutConn) Close() error                { return nil }

func TestSessionEndedByATimeoutStopsServing(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	sess, err := yamux.Server(timedOutConn{}, yamuxConfig(logger))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveSession(context.Background(), sess, reply(""), nil, logger) }()
	select {
	case err := <-done:
		if !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("serveSession = %v, want the timeout as the reason", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serveSession kept serving a session whose connection timed out")
	}
}

func TestServerWhoseListenerFailsReturnsAndDropsItsNodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(allowGoodProof, nil, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	startClient(t, ClientConfig{Addr: ln.Addr().String()}, reply("hello"))
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })

	ln.Close()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("Serve = %v, want the accept error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve kept running after its listener failed")
	}
	if nodes := srv.Nodes(); len(nodes) != 0 {
		t.Fatalf("Nodes() after Serve returned = %v, want none", nodes)
	}
}
