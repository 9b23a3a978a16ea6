package e2e

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// Each node's name for the upstreams resolves, through its own DNS server,
// to its own link, on one port: cutting one node's link leaves the others'
// paths to the upstreams whole.
func TestSoakUpstreamLinksCutOneNode(t *testing.T) {
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
			go func() { _, _ = io.WriteString(c, "upstream"); c.Close() }()
		}
	}()
	nodes := []string{"full", "partial-1", "partial-2"}
	links, dns, port := newUpstreamLinks(t, nodes, ln.Addr().String())
	// reach dials the upstreams as node n would: the name through n's DNS.
	reach := func(n string) error {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, dns[n])
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(ctx, soakUpstreamHost)
		if err != nil {
			return err
		}
		d := net.Dialer{Resolver: r}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], strconv.Itoa(port)))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "upstream" {
			return io.ErrUnexpectedEOF
		}
		return nil
	}
	for _, n := range nodes {
		if err := reach(n); err != nil {
			t.Fatalf("%s cannot reach the upstreams: %v", n, err)
		}
	}
	links["partial-1"].set(linkDown, 0)
	if err := reach("partial-1"); err == nil {
		t.Fatal("partial-1 reached the upstreams through its cut link")
	}
	for _, n := range []string{"full", "partial-2"} {
		if err := reach(n); err != nil {
			t.Fatalf("%s cannot reach the upstreams while partial-1 is cut off: %v", n, err)
		}
	}
}
