package tunnel

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/goroutinetest"
)

// tunnelGoroutines returns the stacks of the goroutines that run code of
// this package outside its tests.
func tunnelGoroutines() []string {
	var found []string
	for _, g := range goroutinetest.Others() {
		if g.Runs("internal/tunnel") {
			found = append(found, g.Stack)
		}
	}
	return found
}

// noTunnelGoroutines fails the test if a goroutine of the package is
// left. Goroutines of other tests may still be ending: the deadline only
// bounds a failure.
func noTunnelGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		left := tunnelGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the tunnel outlive their owner:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(time.Millisecond) // not a spin: a busy machine needs the CPU for the goroutines to end
	}
}

// TestClientServeReturnsAfterItsHandlers: the handler of a request under
// way when the partial node stops has returned by the time Serve does, so
// that the node can close what the handler uses (its mirrors, its store).
func TestClientServeReturnsAfterItsHandlers(t *testing.T) {
	srv, addr, _ := startServer(t, "127.0.0.1:0", nil)
	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	entered := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // the node is stopping
		runtime.Gosched()
		note("handler returned")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		err := Serve(ctx, ClientConfig{Addr: addr, NodeID: testNode, Proof: goodProof}, handler)
		note("Serve returned")
		served <- err
	}()
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	go get(srv.Transport(), nodeURL(testNode, "/slow")) // fails when the node stops
	<-entered
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ", ") != "handler returned, Serve returned" {
		t.Fatalf("events: %v; want the handler to return before Serve", events)
	}
}

// TestNoGoroutineOfTheTunnelOutlivesServe: once both ends' Serve have
// returned, nothing that they or DialNode started runs: not the streams'
// goroutines, not an Open that a cancelled caller left.
func TestNoGoroutineOfTheTunnelOutlivesServe(t *testing.T) {
	srv, addr, stopServer := startServer(t, "127.0.0.1:0", nil)
	stopClient := startClient(t, ClientConfig{Addr: addr}, reply("hello"))
	waitFor(t, "node 7 is connected", func() bool { return srv.Connected(testNode) })
	for range 3 {
		if got, err := get(srv.Transport(), nodeURL(testNode, "/")); err != nil || got != "hello" {
			t.Fatalf("GET = %q, %v", got, err)
		}
	}
	for range 20 { // callers that give up while their stream opens
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		if c, err := srv.DialNode(ctx, testNode); err == nil {
			c.Close()
		}
	}
	c, err := srv.DialNode(context.Background(), testNode)
	if err != nil {
		t.Fatalf("DialNode: %v", err)
	}
	defer c.Close()
	stopClient()
	stopServer()
	noTunnelGoroutines(t)
}
