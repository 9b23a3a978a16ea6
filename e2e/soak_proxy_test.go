package e2e

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// linkMode is what a soak link does to the connections through it.
type linkMode int

const (
	linkUp        linkMode = iota // bytes pass (after the link's delay)
	linkDown                      // connections are cut and new ones closed at once (a refused peer)
	linkBlackhole                 // connections are accepted and bytes held until the link heals (a lost route)
)

// link is a TCP proxy on 127.0.0.1 in front of one address: the roles of
// a soak fleet dial each other through links, so that the test can cut,
// black-hole or slow the path between any two of them.
type link struct {
	name   string
	addr   string // where clients dial
	target string // where the link forwards

	ln     net.Listener
	mu     sync.Mutex
	mode   linkMode
	delay  time.Duration
	healed chan struct{} // closed when the link leaves linkBlackhole
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newLink listens on a free port and forwards to target until the test ends.
func newLink(t testing.TB, name, target string) *link {
	t.Helper()
	addr := freeAddr(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return linkOn(t, name, ln, target)
}

// linkOn forwards what ln accepts to target until the test ends.
func linkOn(t testing.TB, name string, ln net.Listener, target string) *link {
	l := &link{name: name, addr: ln.Addr().String(), target: target, ln: ln, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(l.healed)
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

// set changes the link's mode and delay. Going down cuts every open
// connection; leaving the black hole releases the bytes it held.
func (l *link) set(mode linkMode, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mode == linkBlackhole && mode != linkBlackhole {
		close(l.healed)
	}
	if mode == linkBlackhole && l.mode != linkBlackhole {
		l.healed = make(chan struct{})
	}
	l.mode, l.delay = mode, delay
	if mode == linkDown {
		for c := range l.conns {
			_ = c.Close()
		}
	}
}

// heal makes the link pass bytes at once again.
func (l *link) heal() { l.set(linkUp, 0) }

// state is the link's mode and delay, and a channel closed when it leaves
// the black hole.
func (l *link) state() (linkMode, time.Duration, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mode, l.delay, l.healed
}

func (l *link) close() {
	_ = l.ln.Close()
	l.set(linkDown, 0)
	l.wg.Wait()
}

func (l *link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if mode, _, _ := l.state(); mode == linkDown {
			_ = c.Close()
			continue
		}
		l.wg.Add(1)
		go l.serve(c)
	}
}

// track records c as open (false if the link went down meanwhile).
func (l *link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mode == linkDown {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *link) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	_ = c.Close()
}

func (l *link) serve(client net.Conn) {
	defer l.wg.Done()
	if !l.track(client) {
		_ = client.Close()
		return
	}
	defer l.untrack(client)
	server, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		return // the client sees its connection closed, as from a refusing peer
	}
	if !l.track(server) {
		_ = server.Close()
		return
	}
	defer l.untrack(server)
	done := make(chan bool, 2)
	go func() { done <- l.pipe(server, client) }()
	go func() { done <- l.pipe(client, server) }()
	if clean := <-done; !clean {
		// One direction broke: close both, so the other ends too.
		_ = client.Close()
		_ = server.Close()
	}
	<-done
}

// pipe copies src to dst, holding each chunk while the link is a black
// hole and delaying it by the link's delay. It reports whether src ended
// cleanly, in which case dst's writing half is closed and the other
// direction goes on.
func (l *link) pipe(dst, src net.Conn) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for {
				mode, delay, healed := l.state()
				if mode == linkDown {
					return false
				}
				if mode == linkBlackhole {
					<-healed
					continue
				}
				if delay > 0 {
					time.Sleep(delay)
				}
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && errors.Is(err, io.EOF) {
				return cw.CloseWrite() == nil
			}
			return false
		}
	}
}
