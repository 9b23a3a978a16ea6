package e2e

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The soak's history check must catch what it is there to catch: a value
// the upstream never gave a ref, and a ref served older than before,
// while an upstream that went back itself is no violation.
func TestSoakCheckerCatchesAForgedValueAndAStepBack(t *testing.T) {
	a, b, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	r := &soakRepo{name: soakName(0), refs: map[string]string{}, hist: map[string][]string{}}
	r.record("refs/heads/main", a)
	r.record("refs/heads/main", b)
	ups := &soakUpstreams{host: "127.0.0.1:1", repos: []*soakRepo{r}}
	ch := newSoakChecker(&soakFleet{t: t, ups: ups})
	steps := []struct {
		served string
		want   int // violations so far
	}{
		{a, 0},
		{b, 0},
		{a, 1}, // back to a value the upstream left
		{c, 2}, // never the upstream's
	}
	for _, s := range steps {
		ch.checkRefs(0, map[string]string{"refs/heads/main": s.served}, "test")
		if ch.nViolation != s.want {
			t.Fatalf("after serving %.7s: %d violations, want %d (%v)", s.served, ch.nViolation, s.want, ch.violations)
		}
	}
	// The upstream force-pushes back to a: serving it again is right.
	r.record("refs/heads/main", a)
	ch.checkRefs(0, map[string]string{"refs/heads/main": a}, "test")
	if ch.nViolation != 2 {
		t.Fatalf("an upstream that went back itself counted as a violation: %v", ch.violations)
	}
}

// A soak link passes bytes, holds them while black-holed and releases them
// when healed, and cuts its connections and refuses new ones while down.
func TestSoakLinkHoldsAndCuts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	l := newLink(t, "echo", ln.Addr().String())
	c, err := net.Dial("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo := func(msg string, wait time.Duration) (string, error) {
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, len(msg))
		n, err := io.ReadFull(c, buf)
		return string(buf[:n]), err
	}
	if got, err := echo("one", 30*time.Second); got != "one" {
		t.Fatalf("through a healthy link: %q, %v", got, err)
	}
	l.set(linkBlackhole, 0)
	if got, _ := echo("two", 300*time.Millisecond); got != "" {
		t.Fatalf("a black hole passed %q", got)
	}
	l.heal()
	buf := make([]byte, 3)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "two" {
		t.Fatalf("after healing: %q, %v", buf, err)
	}
	l.set(linkDown, 0)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Fatal("a connection through a link that went down still reads")
	}
	c2, err := net.Dial("tcp", l.addr)
	if err == nil {
		_ = c2.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c2.Read(buf); err == nil {
			t.Fatal("a link that is down let a new connection through")
		}
		c2.Close()
	}
}
