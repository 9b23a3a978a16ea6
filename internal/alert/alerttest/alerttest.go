// Package alerttest has receivers of alerts for tests, real servers on
// 127.0.0.1 that record what they are sent: an SMTP server that speaks
// enough of the protocol for net/smtp (EHLO, STARTTLS, AUTH PLAIN, MAIL,
// RCPT, DATA, QUIT) and an HTTP receiver. Tests only: it is not a mail
// server.
package alerttest

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Mail is one message an SMTP server took.
type Mail struct {
	From string
	To   []string
	// Data is the message as sent, its lines ending in CRLF, dots unstuffed.
	Data string
	// User is who authenticated ("" if nobody); TLS tells whether the
	// message came over TLS (implicit or STARTTLS).
	User string
	TLS  bool
}

// SMTPServer is a minimal SMTP server.
type SMTPServer struct {
	// Addr is the server's host:port.
	Addr string
	ln   net.Listener
	tls  *tls.Config
	// implicit: TLS from the first byte (smtps).
	implicit bool
	// users are the accepted user:password pairs; none: AUTH not offered.
	users map[string]string

	mu    sync.Mutex
	mails []Mail
	wg    sync.WaitGroup
}

// SMTPOptions configure StartSMTP.
type SMTPOptions struct {
	// TLS, when set, is offered with STARTTLS, or from the first byte
	// when Implicit.
	TLS      *tls.Config
	Implicit bool
	// Users are the user:password pairs AUTH PLAIN accepts; with none the
	// server offers no AUTH.
	Users map[string]string
}

// StartSMTP starts an SMTP server on 127.0.0.1; the test's cleanup stops it.
func StartSMTP(t testing.TB, o SMTPOptions) *SMTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SMTPServer{Addr: ln.Addr().String(), ln: ln, tls: o.TLS, implicit: o.Implicit, users: o.Users}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// Mails returns the messages taken so far.
func (s *SMTPServer) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

func (s *SMTPServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); defer c.Close(); s.serve(c) }()
	}
}

func (s *SMTPServer) serve(c net.Conn) {
	isTLS := false
	if s.implicit {
		tc := tls.Server(c, s.tls)
		if tc.Handshake() != nil {
			return
		}
		c, isTLS = tc, true
	}
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	say := func(line string) bool {
		_, err := w.WriteString(line + "\r\n")
		return err == nil && w.Flush() == nil
	}
	if !say("220 alerttest ESMTP") {
		return
	}
	var m Mail
	user := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			ext := []string{"250-alerttest"}
			if s.tls != nil && !isTLS {
				ext = append(ext, "250-STARTTLS")
			}
			if len(s.users) > 0 {
				ext = append(ext, "250-AUTH PLAIN")
			}
			ext = append(ext, "250 8BITMIME")
			if !say(strings.Join(ext, "\r\n")) {
				return
			}
		case "STARTTLS":
			if s.tls == nil || isTLS {
				say("502 no")
				continue
			}
			say("220 go ahead")
			tc := tls.Server(c, s.tls)
			if tc.Handshake() != nil {
				return
			}
			c, isTLS = tc, true
			r, w = bufio.NewReader(c), bufio.NewWriter(c)
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			b, err := base64.StdEncoding.DecodeString(resp)
			parts := strings.Split(string(b), "\x00")
			if !strings.EqualFold(mech, "PLAIN") || err != nil || len(parts) != 3 || s.users[parts[1]] != parts[2] || parts[2] == "" {
				say("535 authentication failed")
				continue
			}
			user = parts[1]
			say("235 ok")
		case "MAIL":
			if len(s.users) > 0 && user == "" {
				say("530 authentication required")
				continue
			}
			m = Mail{From: addrArg(arg), User: user, TLS: isTLS}
			say("250 ok")
		case "RCPT":
			m.To = append(m.To, addrArg(arg))
			say("250 ok")
		case "DATA":
			say("354 end with .")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data = b.String()
			s.mu.Lock()
			s.mails = append(s.mails, m)
			s.mu.Unlock()
			say("250 queued")
		case "RSET", "NOOP":
			say("250 ok")
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 not implemented")
		}
	}
}

// addrArg is the address of "FROM:<a@b>" or "TO:<a@b> ...".
func addrArg(arg string) string {
	_, a, _ := strings.Cut(arg, ":")
	a, _, _ = strings.Cut(strings.TrimSpace(a), " ")
	return strings.Trim(a, "<>")
}

// Request is one request an HTTP receiver got.
type Request struct {
	Path, Query string
	Header      http.Header
	Body        []byte
}

// HTTPReceiver records the POSTs it gets; it answers with Answer (default
// 200 and an empty JSON object).
type HTTPReceiver struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	// answer returns the status and body of the n-th request (from 0).
	answer func(n int) (int, string)
}

// StartHTTP starts an HTTP receiver on 127.0.0.1; answer (nil: 200, "{}")
// says what to answer to the n-th request.
func StartHTTP(t testing.TB, answer func(n int) (int, string)) *HTTPReceiver {
	t.Helper()
	if answer == nil {
		answer = func(int) (int, string) { return http.StatusOK, "{}" }
	}
	h := &HTTPReceiver{answer: answer}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		h.mu.Lock()
		n := len(h.requests)
		h.requests = append(h.requests, Request{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		h.mu.Unlock()
		code, text := h.answer(n)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, text)
	}))
	h.URL = h.srv.URL
	t.Cleanup(h.srv.Close)
	return h
}

// Requests returns the requests received so far.
func (h *HTTPReceiver) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}
