package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A node in clear whose coordinator speaks TLS says so once per change:
// not at every retry, again after another failure.
func TestATLSCoordinatorDialledInClearIsNamedOncePerChange(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	tlsAddr, plainAddr := srv.Listener.Addr().String(), plain.Listener.Addr().String()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	hints := func() int {
		return strings.Count(logs.String(), "the coordinator speaks TLS: add --tls (or --tls-ca FILE)")
	}
	preface := errors.New(`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: EOF"`)
	h := tlsHint{}
	ctx := context.Background()
	for range 3 {
		h.observe(ctx, log, tlsAddr, preface)
	}
	if hints() != 1 || !strings.Contains(logs.String(), "coordinator="+tlsAddr) {
		t.Fatalf("three failures against a TLS coordinator: %d hints, want 1:\n%s", hints(), logs.String())
	}
	h.observe(ctx, log, tlsAddr, errors.New("register: rpc error: code = DeadlineExceeded"))
	h.observe(ctx, log, tlsAddr, preface)
	if hints() != 2 {
		t.Fatalf("after another failure, the preface again: %d hints, want 2", hints())
	}
	for range 2 {
		h.observe(ctx, log, plainAddr, preface)
	}
	if hints() != 2 {
		t.Fatalf("a server that does not speak TLS was named as one:\n%s", logs.String())
	}
}
