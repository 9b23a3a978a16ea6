package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/coordinator"
	"github.com/gitfleet/gitfleet/internal/testnet"
)

func TestCutFlag(t *testing.T) {
	v, rest := cutFlag([]string{"--data", "d", "--server", "http://a", "-server=http://b", "--", "--server", "c"}, "server")
	if v != "http://b" || strings.Join(rest, " ") != "--data d -- --server c" {
		t.Errorf("cutFlag = %q, %q", v, rest)
	}
}

func TestDoctorExitStatus(t *testing.T) {
	t.Setenv("GITFLEET_JOIN_TOKEN", "")
	t.Setenv("GITFLEET_FULL_TOKEN", "")
	ln, err := net.Listen("tcp", testnet.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	coord, err := net.Listen("tcp", testnet.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- coordinator.Serve(ctx, coordinator.Config{DataDir: t.TempDir(), Catalog: filepath.Join(data, "no-catalog"),
			CatalogInterval: time.Hour, JoinToken: "j", FullToken: "f"}, slog.New(slog.DiscardHandler), coord)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})

	var out, errOut bytes.Buffer
	code := run([]string{"doctor", "full", "--server", srv.URL, "--data", data, "--coordinator", coord.Addr().String(),
		"--join-token", "j", "--full-token", "f"}, &out, &errOut)
	failures := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "fail") && !strings.HasPrefix(l, "fail  disk") { // this machine's disk is not ours to judge
			failures++
		}
	}
	if failures != 0 || (code != 0) != strings.Contains(out.String(), "fail  disk") {
		t.Errorf("healthy: exit %d\n%s%s", code, out.String(), errOut.String())
	}

	out.Reset()
	code = run([]string{"doctor", "partial", "--data", data, "--coordinator", testnet.Addr(t)}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "fail  coordinator") || !strings.Contains(out.String(), "fail  token join-token") {
		t.Errorf("closed coordinator, no token: exit %d\n%s", code, out.String())
	}
	if code := run([]string{"doctor", "nurse"}, &out, &errOut); code != 2 {
		t.Errorf("unknown role: exit %d", code)
	}
}
