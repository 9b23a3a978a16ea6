// Package tunnel owns the outbound tunnel between a partial node behind NAT
// and the full node. The partial node dials one TCP (optionally TLS)
// connection to the full node, authenticates with a one-line handshake, and
// then serves HTTP over yamux streams that the full node opens, so that the
// full node can git-fetch from a worker it cannot dial. Full nodes open
// the same tunnel to each other: through it one pulls what another owns,
// and relays to it the requests for what it holds.
//
// The package moves bytes and authenticates peers through a callback. It
// must not know about repositories or git, and it must not decide who may
// connect: the caller's Authenticate function does.
package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// handshakeTimeout bounds the whole handshake (TLS included) of one
// connection, so that idle unauthenticated connections do not pile up.
const handshakeTimeout = 10 * time.Second

// ErrNotConnected is returned (wrapped) when the full node has no tunnel to
// the node it is asked to reach.
var ErrNotConnected = errors.New("node has no tunnel to this full node")

// yamuxConfig is the session configuration of both ends.
func yamuxConfig(logger *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	// Large windows let one stream carry a packfile at the link's speed.
	c.MaxStreamWindowSize = 16 << 20
	// A stream closed on one side (a request given up before its answer
	// ended) keeps what the other side still sends, up to the window,
	// until that side closes too; a hostile peer never does. Past this
	// bound the stream is reset (yamux's default: 5 minutes, 16 MiB held
	// each). An honest side closes as soon as its handler returns.
	c.StreamCloseTimeout = 10 * time.Second
	c.EnableKeepAlive = true
	c.KeepAliveInterval = 15 * time.Second
	c.LogOutput = nil
	c.Logger = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	return c
}

// Server is the full node's end of the tunnels: it accepts partial nodes'
// connections and opens streams to them. It is safe for concurrent use.
type Server struct {
	auth      func(nodeID uint32, proof string) error
	logger    *slog.Logger
	tlsConf   *tls.Config
	transport *http.Transport
	proxy     http.Handler

	mu       sync.Mutex
	sessions map[uint32]*session
	// Disconnect counts in epoch and notes in cutAt when it cut each
	// node, so that a handshake that was under way then does not bring
	// the node back.
	epoch uint64
	cutAt map[uint32]uint64
}

// NewServer returns a Server that admits a node when auth returns nil for
// its ID and proof. tlsConf nil means plain TCP. A nil logger discards logs.
func NewServer(auth func(nodeID uint32, proof string) error, logger *slog.Logger, tlsConf *tls.Config) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		auth:     auth,
		logger:   logger,
		tlsConf:  tlsConf,
		sessions: make(map[uint32]*session),
	}
	s.transport = &http.Transport{
		DialContext: s.dialHost,
		// Streams are cheap, but keeping a few idle per node saves a
		// round trip for each request of a git fetch.
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		// Pass bodies through untouched: packfiles are already compressed.
		DisableCompression: true,
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite:       rewriteToNode,
		Transport:     s.transport,
		FlushInterval: -1,
		ErrorHandler:  s.proxyError,
	}
	return s
}

// closeWhenDone closes c when ctx is done, until the returned stop is
// called. stop waits for a close under way, so that no goroutine outlives
// the caller, and reports whether it came first (c was not closed).
func closeWhenDone(ctx context.Context, c io.Closer) (stop func() bool) {
	closed := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(closed)
		_ = c.Close()
	})
	return func() bool {
		if stopAfter() {
			return true
		}
		<-closed
		return false
	}
}

// session is a node's yamux session and the goroutines of DialNode that
// open streams on it. They are counted (under Server.mu) only while the
// session is in Server.sessions, so that its handle can wait for them
// once it has taken the session out.
type session struct {
	*yamux.Session
	opening sync.WaitGroup
}

// Serve accepts tunnels on ln until ctx is done, then closes ln and every
// session it accepted and returns ctx.Err(). It also returns, likewise, if
// ln fails. A node that connects again replaces its older session. Serve
// returns once every goroutine it started, and every goroutine of DialNode
// on its sessions, has ended.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	// Pooled streams of sessions that are gone are of no use.
	defer s.transport.CloseIdleConnections()
	// Leaving Serve for any reason ends the connections it accepted.
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer closeWhenDone(ctx, ln)()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			_ = ln.Close()
			return fmt.Errorf("tunnel: accept on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() { s.handle(connCtx, conn) })
	}
}

// handle authenticates conn and then keeps its session registered until
// the session ends.
func (s *Server) handle(ctx context.Context, raw net.Conn) {
	// Closing the connection also ends the yamux session on top of it.
	defer closeWhenDone(ctx, raw)()
	log := s.logger.With("remote", raw.RemoteAddr().String())
	conn := raw
	if s.tlsConf != nil {
		conn = tls.Server(conn, s.tlsConf)
	}
	s.mu.Lock()
	began := s.epoch
	s.mu.Unlock()
	nodeID, err := s.handshake(conn)
	if err != nil {
		log.Warn("tunnel handshake failed", "err", err)
		_ = conn.Close()
		return
	}
	log = log.With("node", nodeID)
	ys, err := yamux.Client(conn, yamuxConfig(log))
	if err != nil {
		log.Error("start yamux session", "err", err)
		_ = conn.Close()
		return
	}
	sess := &session{Session: ys}
	s.mu.Lock()
	if s.cutAt[nodeID] > began {
		s.mu.Unlock()
		_ = sess.Close()
		log.Info("tunnel closed: the node was disconnected during its handshake")
		return
	}
	old := s.sessions[nodeID]
	s.sessions[nodeID] = sess
	s.mu.Unlock()
	if old != nil {
		_ = old.Close()
		log.Info("tunnel replaced the node's older tunnel")
	} else {
		log.Info("tunnel up")
	}

	<-sess.CloseChan()
	s.mu.Lock()
	if s.sessions[nodeID] == sess {
		delete(s.sessions, nodeID)
	}
	s.mu.Unlock()
	// Out of the map (here, or by Disconnect or a newer session): no
	// DialNode counts itself in any more.
	sess.opening.Wait()
	log.Info("tunnel down")
}

// handshake reads the hello, asks auth, and answers OK or ERR.
func (s *Server) handshake(conn net.Conn) (uint32, error) {
	if err := conn.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return 0, fmt.Errorf("set handshake deadline: %w", err)
	}
	line, err := readLine(conn)
	var nodeID uint32
	var proof string
	if err == nil {
		nodeID, proof, err = parseHello(line)
	}
	if err == nil {
		if aerr := s.auth(nodeID, proof); aerr != nil {
			err = fmt.Errorf("node %d not admitted: %w", nodeID, aerr)
		}
	}
	if err != nil {
		// Best effort: the peer may be gone or not speak the protocol.
		_, _ = io.WriteString(conn, formatErr(err))
		return 0, err
	}
	if _, err := io.WriteString(conn, "OK\n"); err != nil {
		return 0, fmt.Errorf("node %d: write OK: %w", nodeID, err)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return 0, fmt.Errorf("node %d: clear handshake deadline: %w", nodeID, err)
	}
	return nodeID, nil
}

func (s *Server) session(nodeID uint32) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[nodeID]
}

// Connected reports whether nodeID has a tunnel up.
func (s *Server) Connected(nodeID uint32) bool { return s.session(nodeID) != nil }

// Nodes returns the IDs of the connected nodes in increasing order.
func (s *Server) Nodes() []uint32 {
	s.mu.Lock()
	ids := make([]uint32, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// DialNode opens a stream to nodeID through its tunnel. The error wraps
// ErrNotConnected when the node has no tunnel.
func (s *Server) DialNode(ctx context.Context, nodeID uint32) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	sess := s.sessions[nodeID]
	if sess != nil {
		sess.opening.Add(1)
	}
	s.mu.Unlock()
	if sess == nil {
		return nil, fmt.Errorf("tunnel: dial node %d: %w", nodeID, ErrNotConnected)
	}
	type opened struct {
		conn net.Conn
		err  error
	}
	// Open blocks only when the node is not acknowledging streams; do not
	// let that outlive ctx. The stream of a caller that has gone is
	// closed here.
	ch := make(chan opened)
	go func() {
		defer sess.opening.Done()
		c, err := sess.Open()
		select {
		case ch <- opened{c, err}:
		case <-ctx.Done():
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, fmt.Errorf("tunnel: open stream to node %d: %w", nodeID, o.err)
		}
		return o.conn, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("tunnel: open stream to node %d: %w", nodeID, ctx.Err())
	}
}

// hostPrefix makes the HTTP host name of a node: node 7 is "node-7".
const hostPrefix = "node-"

// NodeHost is the host name by which Transport reaches nodeID through its
// tunnel.
func NodeHost(nodeID uint32) string { return hostPrefix + strconv.FormatUint(uint64(nodeID), 10) }

func (s *Server) dialHost(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	digits, ok := strings.CutPrefix(host, hostPrefix)
	id, err := strconv.ParseUint(digits, 10, 32)
	if !ok || err != nil {
		return nil, fmt.Errorf("tunnel: host %q does not name a node (want %s<id>)", host, hostPrefix)
	}
	return s.DialNode(ctx, uint32(id))
}

// Transport is an HTTP transport whose requests to http://node-<id>/...
// go to node <id> through its tunnel.
func (s *Server) Transport() *http.Transport { return s.transport }

// ReverseProxy serves /<nodeID>/<rest> by forwarding the request to
// http://node-<nodeID>/<rest> through the tunnel, streaming both bodies.
// It lets the git CLI fetch from a partial node through a local listener.
func (s *Server) ReverseProxy() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := splitNodePath(r.URL.Path); !ok {
			http.Error(w, "tunnel: path must be /<nodeID>/<path>", http.StatusNotFound)
			return
		}
		s.proxy.ServeHTTP(w, r)
	})
}

// splitNodePath splits "/7/a/b.git/info/refs" into 7 and "/a/b.git/info/refs".
func splitNodePath(p string) (uint32, string, bool) {
	first, rest, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !ok {
		return 0, "", false
	}
	id, err := strconv.ParseUint(first, 10, 32)
	if err != nil {
		return 0, "", false
	}
	return uint32(id), "/" + rest, true
}

// rewriteToNode runs only on paths that ReverseProxy has checked.
func rewriteToNode(pr *httputil.ProxyRequest) {
	id, rest, _ := splitNodePath(pr.In.URL.Path)
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = NodeHost(id)
	pr.Out.URL.Path = rest
	pr.Out.URL.RawPath = ""
	pr.Out.Host = ""
}

func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, ErrNotConnected) {
		status = http.StatusServiceUnavailable
	}
	s.logger.Warn("tunnel proxy request failed", "host", r.URL.Host, "path", r.URL.Path, "err", err)
	http.Error(w, err.Error(), status)
}
