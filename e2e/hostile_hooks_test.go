package e2e

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// deliver posts a webhook to the full node and returns the answer's status
// and Retry-After; headers are "Name: value".
func deliver(t *testing.T, base, host string, body []byte, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/hooks/"+host, bytes.NewReader(body))
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// trickleTo sends a request announcing a 100,000-byte body to addr and
// writes a byte of it every 100 ms, and returns the answer's status.
func trickleTo(t *testing.T, addr, path string, headers ...string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: mirror\r\nContent-Length: 100000\r\n%s\r\n", path,
		strings.Join(append(headers, ""), "\r\n"))
	stop := make(chan struct{})
	defer close(stop)
	go gittest.TrickleBody(conn, 100*time.Millisecond, stop)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // the fleet's bound is 1 s
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: no answer while the body trickles: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// giteeHeaders are the headers of a Gitee delivery signed at ms.
func giteeHeaders(ms int64) []string {
	ts := strconv.FormatInt(ms, 10)
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write([]byte(ts + "\n" + webhookSecret))
	return []string{"X-Gitee-Event: Push Hook", "X-Gitee-Timestamp: " + ts,
		"X-Gitee-Token: " + base64.StdEncoding.EncodeToString(m.Sum(nil))}
}

// TestHostileWebhooksAndSlowBodiesAtThePublicEdge plays the hostile party
// against a real fleet: bodies trickled to a webhook and to the API, a
// GitLab delivery without an id replayed, a Gitee signature replayed with
// another body, a flood of pushes for one upstream host.
func TestHostileWebhooksAndSlowBodiesAtThePublicEdge(t *testing.T) {
	f := edgeFleet(t, seq(0, 12), "--serve-read-timeout", "1s",
		"--webhook-host-rate", "1", "--webhook-host-burst", "4")

	t.Run("trickled webhook and API bodies get 408", func(t *testing.T) {
		if code := trickleTo(t, f.http, "/hooks/github", "X-GitHub-Event: push", "X-Hub-Signature-256: sha256=00"); code != http.StatusRequestTimeout {
			t.Errorf("webhook: %d, want 408", code)
		}
		if code := trickleTo(t, f.http, "/api/v1/repos", "Authorization: Bearer "+apiToken); code != http.StatusRequestTimeout {
			t.Errorf("API: %d, want 408", code)
		}
	})

	t.Run("a GitLab delivery without an id is acted on once", func(t *testing.T) { // a token of the host
		body := []byte(`{"before":"1","after":"2","project":{"git_http_url":"` + f.up.RepoURL(f.name(0)) + `"}}`)
		h := []string{"X-Gitlab-Event: Push Hook", "X-Gitlab-Token: " + webhookSecret}
		if code, _ := deliver(t, f.base, "gitlab", body, h...); code != http.StatusAccepted {
			t.Fatalf("first delivery: %d, want 202", code)
		}
		if code, _ := deliver(t, f.base, "gitlab", body, h...); code != http.StatusOK {
			t.Fatalf("replay: %d, want 200 (answered, not acted on)", code)
		}
	})

	t.Run("a Gitee signature replayed with another body is refused", func(t *testing.T) { // a token of the host
		h := giteeHeaders(time.Now().UnixMilli())
		body := []byte(`{"repository":{"clone_url":"` + f.up.RepoURL(f.name(0)) + `"}}`)
		if code, _ := deliver(t, f.base, "gitee", body, h...); code != http.StatusAccepted {
			t.Fatalf("first delivery: %d, want 202", code)
		}
		other := []byte(`{"repository":{"clone_url":"` + f.up.RepoURL(f.name(1)) + `"}}`)
		if code, _ := deliver(t, f.base, "gitee", other, h...); code != http.StatusConflict {
			t.Fatalf("the same signature with another body: %d, want 409", code)
		}
	})

	t.Run("a flood of pushes for the repositories of one host is bounded", func(t *testing.T) {
		// The deliveries above spent some of the burst of 4; a token a
		// minute comes back. A push that joins a queued check costs
		// nothing (the first, of repository 0, may): the others each name
		// another repository. Unbounded, all 12 would start a check.
		accepted, refused := 0, 0
		for i := range 12 {
			code, retry := pushHook2(t, f.base, f.up.RepoURL(f.name(i)), fmt.Sprintf("flood-%d", i))
			switch {
			case code == http.StatusAccepted:
				accepted++
			case code == http.StatusTooManyRequests && retry != "":
				refused++
			default:
				t.Fatalf("push %d: %d (Retry-After %q)", i, code, retry)
			}
		}
		if accepted > 5 || refused < 7 {
			t.Fatalf("12 pushes for one host: %d accepted, %d refused; want at most the burst of 4 (and a token a minute) accepted", accepted, refused)
		}
		// The last repository's push was refused: it has no queued check to join.
		code := call(t, "POST", f.base+"/api/v1/repos/"+f.key(11)+"/fetch", apiToken, nil, nil)
		if code != http.StatusTooManyRequests {
			t.Fatalf("an API fetch of the flooded host: %d, want 429", code)
		}
	})
}

// pushHook2 is pushHook that also returns Retry-After.
func pushHook2(t *testing.T, base, url, delivery string) (int, string) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":"%s","repository":{"clone_url":"%s"}}`, delivery, url))
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write(body)
	return deliver(t, base, "github", body, "X-GitHub-Event: push", "X-GitHub-Delivery: "+delivery,
		"X-Hub-Signature-256: sha256="+fmt.Sprintf("%x", m.Sum(nil)))
}
