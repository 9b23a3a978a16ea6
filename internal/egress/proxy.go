package egress

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Proxy is an HTTP proxy on 127.0.0.1 through which git reaches upstreams:
// CONNECT for https, absolute-URI requests for http, every upstream
// connection made by its Dialer. It follows no redirect (a 3xx goes back to
// git, which follows none either). Each git process gets its own random
// credential (Begin), so that other users of the machine cannot use the
// proxy, and the refusal that failed a process can be told to its caller.
type Proxy struct {
	dialer *Dialer
	log    *slog.Logger
	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed when srv.Serve has returned

	mu       sync.Mutex
	sessions map[string]*session // by credential
}

// session is one git process's use of the proxy.
type session struct {
	transport *http.Transport // its own, so that each process resolves again

	mu      sync.Mutex
	blocked *BlockedError // the first refusal
	conns   map[net.Conn]bool
	ended   bool
}

// NewProxy starts a proxy on a free port of 127.0.0.1.
func NewProxy(d *Dialer, log *slog.Logger) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("egress: proxy: listen on loopback: %w", err)
	}
	p := &Proxy{dialer: d, log: log, ln: ln, served: make(chan struct{}), sessions: map[string]*session{}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		defer close(p.served)
		if err := p.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("egress proxy stopped serving: git's fetches through it fail", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops the proxy, ends its connections, and returns once its
// accepting goroutine has.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.served
	p.mu.Lock()
	sessions := p.sessions
	p.sessions = map[string]*session{}
	p.mu.Unlock()
	for _, s := range sessions {
		s.end()
	}
	return err
}

// Begin returns the environment that points one git process at the proxy
// with a fresh credential (in git's configuration environment, never on
// a command line), and a function to call when the process has ended: it
// revokes the credential, closes what is left of the process's
// connections, and returns the refusal that failed one of them, if any.
func (p *Proxy) Begin() (env []string, end func() error) {
	secret := rand.Text()
	s := &session{conns: map[net.Conn]bool{}}
	s.transport = &http.Transport{DialContext: p.dialer.DialContext, Proxy: nil,
		ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute}
	p.mu.Lock()
	p.sessions[secret] = s
	p.mu.Unlock()
	env = []string{
		"GIT_ALLOW_PROTOCOL=" + p.dialer.Policy.Schemes(),
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=http.proxy",
		"GIT_CONFIG_VALUE_0=http://gitfleet:" + secret + "@" + p.Addr(),
		"GIT_CONFIG_KEY_1=http.proxyAuthMethod",
		"GIT_CONFIG_VALUE_1=basic",
		"http_proxy=", "https_proxy=", "HTTPS_PROXY=", "all_proxy=", "ALL_PROXY=", "no_proxy=", "NO_PROXY=",
	}
	return env, func() error {
		p.mu.Lock()
		delete(p.sessions, secret)
		p.mu.Unlock()
		s.end()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.blocked != nil {
			return s.blocked
		}
		return nil
	}
}

func (s *session) end() {
	s.mu.Lock()
	s.ended = true
	conns := s.conns
	s.conns = map[net.Conn]bool{}
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	s.transport.CloseIdleConnections()
}

// track remembers c so that end closes it; false if the session has ended.
func (s *session) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *session) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// refused records err if it is a refusal; it reports whether it was.
func (s *session) refused(err error) bool {
	var be *BlockedError
	if !errors.As(err, &be) {
		return false
	}
	s.mu.Lock()
	if s.blocked == nil {
		s.blocked = be
	}
	s.mu.Unlock()
	return true
}

// session returns the session whose credential r carries.
func (p *Proxy) session(r *http.Request) *session {
	auth := r.Header.Get("Proxy-Authorization")
	enc, ok := strings.CutPrefix(auth, "Basic ")
	if !ok {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return nil
	}
	user, secret, _ := strings.Cut(string(raw), ":")
	if subtle.ConstantTimeCompare([]byte(user), []byte("gitfleet")) != 1 || secret == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[secret]
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := p.session(r)
	if s == nil {
		w.Header().Set("Proxy-Authenticate", `Basic realm="gitfleet"`)
		http.Error(w, "proxy credential required", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r, s)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "only CONNECT and absolute http:// requests", http.StatusBadRequest)
		return
	}
	p.forward(w, r, s)
}

func (p *Proxy) refuse(w http.ResponseWriter, s *session, dest string, err error) {
	if s.refused(err) {
		p.log.Warn("egress: blocked destination", "dest", dest, "err", err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	p.log.Info("egress: upstream unreachable", "dest", dest, "err", err)
	http.Error(w, "upstream unreachable", http.StatusBadGateway)
}

// connect opens a tunnel for https.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, s *session) {
	up, err := p.dialer.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		p.refuse(w, s, r.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !s.track(up) || !s.track(down) {
		up.Close()
		down.Close()
		return
	}
	defer func() {
		up.Close()
		down.Close()
		s.untrack(up)
		s.untrack(down)
	}()
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		return
	}
	splice(up, down, buf)
}

// splice copies both ways until one side ends.
func splice(up, down net.Conn, buf *bufio.ReadWriter) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, buf.Reader) // what the client sent after CONNECT, then the rest
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(down, up)
		done <- struct{}{}
	}()
	<-done
	<-done
}

// hopHeaders are not forwarded (RFC 9110, 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends an http:// request on and copies the answer back as it is.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, s *session) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Host = r.URL.Host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := s.transport.RoundTrip(out)
	if err != nil {
		p.refuse(w, s, r.URL.Host, err)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(flushWriter{w}, resp.Body); err != nil {
		// The upstream's answer broke off: break git's too, rather than
		// end it cleanly and make a short answer look complete.
		panic(http.ErrAbortHandler)
	}
}

// flushWriter flushes after each write, so that git sees a stream as it comes.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
