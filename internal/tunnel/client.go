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
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/hashicorp/yamux"
)

// ClientConfig is the partial node's tunnel configuration.
type ClientConfig struct {
	// Addr is the full node's tunnel address, host:port.
	Addr   string
	NodeID uint32
	// Proof is a hex string that the full node's auth callback checks,
	// e.g. an HMAC of the node ID.
	Proof string
	// TLS, if set, wraps the connection in TLS; nil means plain TCP.
	TLS *tls.Config
	// Logger receives the tunnel's events; nil discards them.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before a redial (default 1s
	// and 1m). The wait doubles with each failure up to MaxBackoff and is
	// jittered down by up to half; after a refused handshake it is
	// MaxBackoff, jittered likewise.
	MinBackoff, MaxBackoff time.Duration
	// Clock times the backoff; nil means the wall clock.
	Clock clock.Clock
	// Upload, when set, paces what this end sends through the tunnel (a
	// volunteer's cap on the node's bandwidth, which its downloads
	// share): the streams' writes wait for it before yamux takes them.
	Upload *bandwidth.Limiter
}

func (c ClientConfig) withDefaults() (ClientConfig, error) {
	if c.Addr == "" {
		return c, errors.New("tunnel: no full node address")
	}
	if err := checkProof(c.Proof); err != nil {
		return c, fmt.Errorf("tunnel: node %d: %w", c.NodeID, err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Minute
	}
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c, nil
}

// Serve keeps a tunnel to the full node at cfg.Addr and serves h on every
// stream that the full node opens through it. It redials after any failure
// or disconnect, with backoff on cfg.Clock, until ctx is done, and then
// returns ctx.Err(), once every call of h has returned. It returns early
// only for an unusable cfg.
func Serve(ctx context.Context, cfg ClientConfig, h http.Handler) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.Logger.With("node", cfg.NodeID, "addr", cfg.Addr)
	// Jittered, so that nodes cut off together do not redial together.
	redial := backoff.New(cfg.Clock, cfg.MinBackoff, cfg.MaxBackoff).Jittered(nil)
	for {
		var wait time.Duration
		sess, err := connect(ctx, cfg, log)
		switch {
		case err == nil:
			log.Info("tunnel up")
			start := cfg.Clock.Now()
			err = serveSession(ctx, sess, h, cfg.Upload, log)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Only a session that lasted resets the backoff, so that two
			// nodes configured with the same ID, replacing each other,
			// slow down instead of flapping at MinBackoff.
			if cfg.Clock.Now().Sub(start) >= cfg.MaxBackoff {
				redial.Reset()
			}
			log.Warn("tunnel down", "err", err)
			wait = redial.Failed()
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errRefused):
			log.Error("full node refused the tunnel; check this node's ID and token", "err", err)
			wait = redial.Longest()
		default:
			log.Warn("tunnel connect failed", "err", err)
			wait = redial.Failed()
		}
		log.Debug("tunnel redial scheduled", "wait", wait)
		if err := redial.Wait(ctx, wait); err != nil {
			return err
		}
	}
}

// connect dials the full node, authenticates, and starts the yamux
// session in which this end accepts streams.
func connect(ctx context.Context, cfg ClientConfig, log *slog.Logger) (*yamux.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if cfg.TLS != nil {
		conn, err = (&tls.Dialer{Config: cfg.TLS}).DialContext(ctx, "tcp", cfg.Addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", cfg.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.Addr, err)
	}
	if err := clientHandshake(ctx, conn, cfg.NodeID, cfg.Proof); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("handshake with %s: %w", cfg.Addr, err)
	}
	sess, err := yamux.Server(conn, yamuxConfig(log))
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("start yamux session: %w", err)
	}
	return sess, nil
}

func clientHandshake(ctx context.Context, conn net.Conn, nodeID uint32, proof string) error {
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return fmt.Errorf("set deadline: %w", err)
		}
	}
	// Cancellation unblocks the reads and writes below by closing.
	stop := closeWhenDone(ctx, conn)
	if _, err := io.WriteString(conn, formatHello(nodeID, proof)); err != nil {
		stop()
		return fmt.Errorf("write hello: %w", err)
	}
	line, err := readLine(conn)
	if !stop() {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if err := parseReply(line); err != nil {
		return err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear deadline: %w", err)
	}
	return nil
}

// serveSession serves h on the streams of sess until the session ends or
// ctx is done, and returns why the session ended, once every stream's
// goroutine and handler has returned: a handler never outlives Serve. What
// the streams send is paced by upload (nil: not paced).
func serveSession(ctx context.Context, sess *yamux.Session, h http.Handler, upload *bandwidth.Limiter, log *slog.Logger) error {
	var streams sync.WaitGroup
	defer streams.Wait()
	defer sess.Close()
	defer closeWhenDone(ctx, sess)()
	srv := &http.Server{
		// A handler is counted while its stream is, so that Add never
		// races with Wait; a hijacked stream leaves the count, its
		// handler does not.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			streams.Add(1)
			defer streams.Done()
			h.ServeHTTP(w, r)
		}),
		// http.Server.Close does not wait for the goroutines it started:
		// count them from StateNew (set before Serve can return) to the
		// end of their connection.
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				streams.Add(1)
			case http.StateHijacked, http.StateClosed:
				streams.Done()
			}
		},
		// The full node is authenticated but a slow one must not hold
		// streams open forever.
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	defer srv.Close()
	return srv.Serve(upload.PaceAccepted(sessionListener{sess}))
}

// sessionListener hides the type of yamux's accept errors from
// http.Server, which would otherwise retry forever on a closed session whose
// last error looks temporary (a read that timed out with ETIMEDOUT, as when
// TCP keepalive gives up on a dead full node).
type sessionListener struct{ *yamux.Session }

func (l sessionListener) Accept() (net.Conn, error) {
	c, err := l.Session.Accept()
	if err != nil {
		return nil, fmt.Errorf("tunnel session ended: %w", err)
	}
	return c, nil
}
