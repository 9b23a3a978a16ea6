package api

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// trickle sends a request announcing a body of 100,000 bytes over a real
// TCP connection and then writes one byte every 20 ms (over half an hour
// for the whole body), and returns the answer.
func trickle(t *testing.T, e *testEnv, path string, headers ...string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: mirror\r\nContent-Length: 100000\r\n%s\r\n", path,
		strings.Join(append(headers, ""), "\r\n"))
	stop := make(chan struct{})
	defer close(stop)
	go gittest.TrickleBody(conn, 20*time.Millisecond, stop)
	// Generous: the server's deadline in these tests is 300 ms.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body trickles: %v", err)
	}
	resp.Body.Close()
	return resp
}

func TestATricklingBodyGets408(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		headers    []string
	}{
		{"API", "/api/v1/repos", []string{auth, "Content-Type: application/json"}},
		{"webhook", "/hooks/github", []string{"X-GitHub-Event: push", "X-Hub-Signature-256: sha256=00", "Content-Type: application/json"}},
		{"gitlab webhook", "/hooks/gitlab", []string{"X-Gitlab-Event: Push Hook", "X-Gitlab-Token: " + hookSecrets["gitlab"]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBackend("github.com/a/b")
			e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, ReadTimeout: 300 * time.Millisecond}, b)
			if resp := trickle(t, e, tc.path, tc.headers...); resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("got %d, want 408", resp.StatusCode)
			}
			if len(b.addedCalls()) != 0 {
				t.Error("a trickled body was acted on")
			}
			b.noStart(t)
		})
	}
}

// A refusal made before the body is read (a wrong token) is answered
// within the read deadline too: the server stops reading what is left of
// the body.
func TestARefusalOfATricklingBodyIsAnsweredWithinTheDeadline(t *testing.T) {
	e := newTestEnv(t, Config{WebhookSecrets: hookSecrets, ReadTimeout: 300 * time.Millisecond}, newFakeBackend())
	for _, tc := range []struct {
		path    string
		headers []string
		want    int
	}{
		{"/hooks/gitlab", []string{"X-Gitlab-Event: Push Hook", "X-Gitlab-Token: wrong"}, http.StatusUnauthorized},
		{"/api/v1/repos", []string{"Authorization: Bearer wrong"}, http.StatusUnauthorized},
	} {
		if resp := trickle(t, e, tc.path, tc.headers...); resp.StatusCode != tc.want {
			t.Errorf("%s: got %d, want %d", tc.path, resp.StatusCode, tc.want)
		}
	}
}
