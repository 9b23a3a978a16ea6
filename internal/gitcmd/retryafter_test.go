package gitcmd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"Fri, 27 Nov 2026 13:00:00 GMT", 3 * time.Hour, true},
		{"Fri, 27 Nov 2026 09:00:00 GMT", 0, true}, // past: at once
		{"-5", 0, false},
		{"soon", 0, false},
		{"", 0, false},
		{"99999999999", 0, false}, // not a sane number of seconds
	} {
		got, ok := ParseRetryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLastRetryAfterOfACurlTrace(t *testing.T) {
	trace := `10:05:08.173837 http.c:684              => Send header: GET /a.git/info/refs?service=git-upload-pack HTTP/1.1
10:05:08.173837 http.c:684              => Send header: Retry-After: 9
10:05:08.174969 http.c:684              <= Recv header: HTTP/1.1 503 Service Unavailable
10:05:08.174976 http.c:684              <= Recv header: retry-after: 60
10:05:09.174969 http.c:684              <= Recv header: HTTP/1.1 429 Too Many Requests
10:05:09.174976 http.c:684              <= Recv header: Retry-After: 3600
10:05:09.174982 http.c:684              <= Recv header: Date: Fri, 27 Nov 2026 10:05:08 GMT
`
	got, err := lastRetryAfter(strings.NewReader(trace), time.Now())
	if err != nil || got != time.Hour {
		t.Errorf("lastRetryAfter = %v, %v; want the last answer's 1h (not what was sent)", got, err)
	}
}

// A real git against an upstream that answers 429 with Retry-After: the
// failure is throttled and carries the wait; the trace file is gone.
func TestAThrottledFetchCarriesItsRetryAfter(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7200")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	err := New(Direct(), Options{}).Run(context.Background(), Cmd{Name: "ls-remote", Args: []string{srv.URL + "/a/b.git"}})
	if ClassOf(err) != ClassThrottled {
		t.Fatalf("err = %v, want class throttled", err)
	}
	if got := RetryAfterOf(err); got != 2*time.Hour {
		t.Errorf("RetryAfterOf = %v, want 2h", got)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "gitfleet-curl-trace-*")); len(left) != 0 {
		t.Errorf("trace files left behind: %v", left)
	}

	// An answer without the header asks for nothing.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer plain.Close()
	err = New(Direct(), Options{}).Run(context.Background(), Cmd{Name: "ls-remote", Args: []string{plain.URL + "/a/b.git"}})
	if ClassOf(err) != ClassThrottled || RetryAfterOf(err) != 0 {
		t.Errorf("err = %v, RetryAfterOf = %v; want throttled, 0", err, RetryAfterOf(err))
	}
}

// While a command talks to an upstream, its trace is in Options.TempDir
// (a directory the process empties at its start: a kill -9 mid-fetch
// leaves nothing in the machine's /tmp), not in TMPDIR.
func TestATraceIsWrittenInTheRunnersTempDir(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	sys, own := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", sys)
	seen := make(chan []string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// git is connected: its trace file exists now.
		in, _ := filepath.Glob(filepath.Join(own, "gitfleet-curl-trace-*"))
		out, _ := filepath.Glob(filepath.Join(sys, "gitfleet-curl-trace-*"))
		select {
		case seen <- append(in, out...):
		default:
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	err := New(Direct(), Options{TempDir: own}).Run(context.Background(), Cmd{Name: "ls-remote", Args: []string{srv.URL + "/a/b.git"}})
	if err == nil {
		t.Fatal("ls-remote of a 503 succeeded")
	}
	got := <-seen
	if len(got) != 1 || filepath.Dir(got[0]) != own {
		t.Errorf("trace files during the command: %v; want one, in the runner's TempDir %s", got, own)
	}
	if left, _ := filepath.Glob(filepath.Join(own, "gitfleet-curl-trace-*")); len(left) != 0 {
		t.Errorf("trace files left behind: %v", left)
	}
}

// An upstream that sends the start of an answer and then nothing is cut
// by curl's low-speed limit (60 s in production, 1 s here through git's
// environment): the failure is class timeout, not network.
func TestAStalledUpstreamIsATimeout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("001e# service=git-upload-pack\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	err := New(Direct(), Options{}).Run(context.Background(), Cmd{Name: "ls-remote", Args: []string{srv.URL + "/a/b.git"},
		Env: []string{"GIT_HTTP_LOW_SPEED_LIMIT=1000", "GIT_HTTP_LOW_SPEED_TIME=1"}})
	if ClassOf(err) != ClassTimeout {
		t.Errorf("err = %v (class %s), want class timeout", err, ClassOf(err))
	}
}
