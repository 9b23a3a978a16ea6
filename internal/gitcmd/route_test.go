package gitcmd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// A Runner is built with its route: one made otherwise has none, and runs
// nothing rather than letting git connect anywhere.
func TestARunnerNotMadeByNewRunsNothing(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	var r Runner
	err := r.Run(context.Background(), Cmd{Name: "init", Flags: []string{"--bare", "--quiet"}, Args: []string{repo}})
	if err == nil || !strings.Contains(err.Error(), "not made by New") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if _, err := os.Stat(repo); !os.IsNotExist(err) {
		t.Fatalf("git ran: %s exists (%v)", repo, err)
	}
}

func TestNewRefusesARunnerWithoutARoute(t *testing.T) {
	for name, build := range map[string]func(){
		"the zero Route":    func() { New(Route{}, Options{}) },
		"Through(nil)":      func() { New(Through(nil), Options{}) },
		"Through(nil) only": func() { Through(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("built")
				}
			}()
			build()
		})
	}
}

// LocalOnly reaches no other machine, whatever protocols its options
// allow: git refuses the transport before it connects. Direct, for the
// contrast, does connect.
func TestALocalOnlyRunnerMakesNoConnection(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	url := srv.URL + "/a/b.git"
	_, err := New(LocalOnly(), Options{Protocols: DefaultProtocols}).LsRemote(context.Background(), url)
	if err == nil || requests.Load() != 0 {
		t.Fatalf("local only: err %v, %d requests; want an error and none", err, requests.Load())
	}
	if _, err := New(Direct(), Options{}).LsRemote(context.Background(), url); err == nil || requests.Load() == 0 {
		t.Fatalf("direct: err %v, %d requests; want the server asked (and its 404)", err, requests.Load())
	}
}
