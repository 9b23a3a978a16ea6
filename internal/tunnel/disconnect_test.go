package tunnel

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"
)

func TestAWrongProofForAConnectedIDLeavesTheLiveTunnel(t *testing.T) {
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	startClient(t, ClientConfig{Addr: addr}, reply("real"))
	waitFor(t, "the real node answers", func() bool {
		got, _ := get(srv.Transport(), nodeURL(testNode, "/"))
		return got == "real"
	})

	// An impostor claims node 7's ID with a proof that is not node 7's.
	cfg, err := ClientConfig{Addr: addr, NodeID: testNode, Proof: "bad0"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		sess, err := connect(context.Background(), cfg, cfg.Logger)
		if err == nil {
			sess.Close()
			t.Fatal("an impostor's tunnel was admitted")
		}
		if !errors.Is(err, errRefused) {
			t.Fatalf("impostor: %v, want a refusal", err)
		}
	}
	for range 5 {
		if got, err := get(srv.Transport(), nodeURL(testNode, "/")); err != nil || got != "real" {
			t.Fatalf("GET after the impostor = %q, %v; want the real node's answer", got, err)
		}
	}
}

func TestDisconnectClosesTheTunnel(t *testing.T) {
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	logs := &syncBuffer{}
	startClient(t, ClientConfig{Addr: addr, Logger: slog.New(slog.NewTextHandler(logs, nil)), MinBackoff: time.Hour, MaxBackoff: time.Hour}, reply("hello"))
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	if !srv.Disconnect(testNode) {
		t.Fatal("Disconnect found no tunnel")
	}
	if srv.Connected(testNode) {
		t.Fatal("node 7 is still connected")
	}
	waitFor(t, "the client sees its tunnel closed", func() bool { return logs.Contains("tunnel down") })
	if srv.Disconnect(testNode) {
		t.Fatal("a second Disconnect found a tunnel")
	}
}

func TestDisconnectDuringAHandshakeKeepsTheNodeOut(t *testing.T) {
	// auth admits node 7 only after Disconnect(7) has run: the session
	// that handshake makes must not be kept.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := NewServer(func(id uint32, proof string) error {
		entered <- struct{}{}
		<-release
		return nil
	}, nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	logs := &syncBuffer{}
	startClient(t, ClientConfig{Addr: ln.Addr().String(), Logger: slog.New(slog.NewTextHandler(logs, nil)), MinBackoff: time.Hour, MaxBackoff: time.Hour}, reply("hello"))
	<-entered // the client's hello is with auth
	srv.Disconnect(testNode)
	close(release)
	waitFor(t, "the client's tunnel is closed", func() bool { return logs.Contains("tunnel down") })
	if srv.Connected(testNode) {
		t.Fatal("a node disconnected during its handshake is connected")
	}
}
