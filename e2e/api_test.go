package e2e

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	apiToken      = "e2e-api-token"
	webhookSecret = "e2e-webhook-secret"
)

// apiFleet is a fleet whose full node has an API token and webhook secret.
func apiFleet(t testing.TB, repos []int, before ...func(*fleet)) *fleet {
	t.Helper()
	f := newFleet(t)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main", "dev"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, "api fleet")
	for _, fn := range before { // before the fleet starts
		fn(f)
	}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startFull()
	f.startNode("partial-1", "partial")
	f.startNode("partial-2", "partial")
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	return f
}

func (f *fleet) startFull() {
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--webhook-secret", webhookSecret)
}

// call makes an API request and decodes a JSON answer into out (if not nil).
func call(t testing.TB, method, url, token string, body io.Reader, out any) int {
	t.Helper()
	resp, b := send(t, method, url, token, body)
	decode(t, method, url, resp.StatusCode, b, out)
	return resp.StatusCode
}

// callAsAClient is call made as the API asks its clients to: an answer
// 503 says that the full node cannot reach its coordinator now (it is
// starting, or the coordinator is restarting or electing a leader), and
// the request is made again after its Retry-After (without one, the 503
// is the answer), for up to a minute.
// body is the request's body ("": none).
func callAsAClient(t testing.TB, method, url, token, body string, out any) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		resp, b := send(t, method, url, token, r)
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		wait := time.Duration(secs) * time.Second
		if resp.StatusCode != http.StatusServiceUnavailable || err != nil || secs < 0 || time.Now().Add(wait).After(deadline) {
			decode(t, method, url, resp.StatusCode, b, out)
			return resp.StatusCode
		}
		t.Logf("%s %s: 503 %s; again after its Retry-After of %v", method, url, strings.Join(strings.Fields(string(b)), " "), wait)
		time.Sleep(wait)
	}
}

// send makes an API request and returns the answer with its body read.
func send(t testing.TB, method, url, token string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// decode decodes the JSON answer b into out (if not nil).
func decode(t testing.TB, method, url string, code int, b []byte, out any) {
	t.Helper()
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %s", method, url, code, b)
		}
	}
}

type task struct {
	ID      string            `json:"id"`
	State   string            `json:"state"`
	OldRefs map[string]string `json:"old_refs"`
	NewRefs map[string]string `json:"new_refs"`
	Error   string            `json:"error"`
}

// events subscribes to the full node's event stream.
type events struct {
	mu   sync.Mutex
	got  []map[string]any
	resp *http.Response
}

func subscribe(t testing.TB, base string) *events {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("events: content type %q", ct)
	}
	e := &events{resp: resp}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev map[string]any
			if json.Unmarshal([]byte(data), &ev) == nil {
				e.mu.Lock()
				e.got = append(e.got, ev)
				e.mu.Unlock()
			}
		}
	}()
	return e
}

// find waits for an event about key and ref with the given new object ID.
func (e *events) find(key, ref, newID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.got {
		if ev["key"] == key && ev["ref"] == ref && ev["new"] == newID {
			return nil
		}
	}
	return fmt.Errorf("no event for %s %s -> %s among %d", key, ref, newID, len(e.got))
}

func TestAPIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	repos := seq(0, 6)
	f := apiFleet(t, repos)
	api := f.base + "/api/v1"

	t.Run("list, filter, page and show repositories", func(t *testing.T) {
		var list struct {
			Repos []apiRepo `json:"repos"`
			Total int       `json:"total"`
		}
		// 6 repositories and the catalog's one missing upstream.
		if code := call(t, "GET", api+"/repos?limit=2&offset=1", "", nil, &list); code != 200 || list.Total != 7 || len(list.Repos) != 2 {
			t.Fatalf("page: %d total %d len %d", code, list.Total, len(list.Repos))
		}
		prefix := strings.TrimSuffix(f.key(1), "01") // team1/project-0
		if call(t, "GET", api+"/repos?prefix="+prefix, "", nil, &list); list.Total == 0 || list.Total >= 6 {
			t.Fatalf("prefix filter gave %d", list.Total)
		}
		var detail struct {
			Key   string            `json:"key"`
			Refs  map[string]string `json:"refs"`
			Attrs map[string]string `json:"attrs"`
		}
		if code := call(t, "GET", api+"/repos/"+f.key(0), "", nil, &detail); code != 200 {
			t.Fatalf("show: %d", code)
		}
		want, _ := f.up.Refs(f.name(0))
		if !maps.Equal(detail.Refs, want) {
			t.Fatalf("show refs %v, upstream %v", detail.Refs, want)
		}
		if detail.Attrs["submit"] != "yes" { // project 0 is a YAML entry with an attribute
			t.Fatalf("attributes %v", detail.Attrs)
		}
		var openapi map[string]any
		if code := call(t, "GET", api+"/openapi.json", "", nil, &openapi); code != 200 || openapi["openapi"] == nil {
			t.Fatalf("openapi.json: %d", code)
		}
	})

	t.Run("nodes are listed with their state", func(t *testing.T) {
		var nodes []struct {
			ID     uint32  `json:"id"`
			Mode   string  `json:"mode"`
			State  string  `json:"state"`
			Repos  int     `json:"repos"`
			Weight float64 `json:"effective_weight"`
			Grace  float64 `json:"effective_grace_seconds"`
		}
		var body struct {
			Nodes json.RawMessage `json:"nodes"`
		}
		if code := call(t, "GET", api+"/nodes", "", nil, &body); code != 200 {
			t.Fatalf("nodes: %d", code)
		}
		if err := json.Unmarshal(body.Nodes, &nodes); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range nodes {
			if n.State != "alive" {
				t.Errorf("node %d is %s", n.ID, n.State)
			}
			if n.Weight != 1 || n.Grace != 5 { // --capacity 1, --grace 5s, no flapping penalty
				t.Errorf("node %d: effective weight %v, grace %vs", n.ID, n.Weight, n.Grace)
			}
			total += n.Repos
		}
		if len(nodes) != 3 || total != 6 {
			t.Fatalf("nodes %+v", nodes)
		}
	})

	t.Run("refusals are 4xx JSON, never 5xx", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, token, body string
			want                      int
		}{
			{"POST", "/repos", "", `{"url":"http://x/y"}`, 401},
			{"POST", "/repos", "wrong", `{"url":"http://x/y"}`, 401},
			{"POST", "/repos", apiToken, `{"url":"ftp://example.org/a.git"}`, 400},
			{"POST", "/repos", apiToken, `{"url":"https://user:pw@example.org/a.git"}`, 400},
			{"POST", "/repos", apiToken, `{"url":`, 400},
			{"POST", "/repos", apiToken, `{"url":"https://example.org/a.git","bogus":1}`, 400},
			{"POST", "/repos", apiToken, `{"url":"https://example.org/` + strings.Repeat("a", 2<<20) + `"}`, 413},
			{"DELETE", "/repos/example.org/never/heard", apiToken, "", 404},
			{"DELETE", "/repos/" + f.key(0), "", "", 401},
			{"POST", "/repos/example.org/never/heard/fetch", apiToken, "", 404},
			{"GET", "/tasks/nope", "", "", 404},
			{"PUT", "/nodes", "", "", 405},
		} {
			var e struct {
				Error string `json:"error"`
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			code := call(t, tc.method, api+tc.path, tc.token, body, &e)
			if code != tc.want || e.Error == "" {
				t.Errorf("%s %s (%.40s): %d %q, want %d with a message", tc.method, tc.path, tc.body, code, e.Error, tc.want)
			}
		}
	})

	t.Run("an on-demand fetch sees a push and returns old and new refs", func(t *testing.T) {
		before, _ := f.up.Refs(f.name(2))
		newID, err := f.up.Commit(f.name(2), "dev")
		if err != nil {
			t.Fatal(err)
		}
		var tk task
		code := call(t, "POST", api+"/repos/"+f.key(2)+"/fetch?wait=30s", apiToken, nil, &tk)
		if code != 200 || tk.State != "done" {
			t.Fatalf("fetch: %d %+v", code, tk)
		}
		if tk.OldRefs["refs/heads/dev"] != before["refs/heads/dev"] || tk.NewRefs["refs/heads/dev"] != newID {
			t.Fatalf("task refs old %v new %v, want dev %s -> %s", tk.OldRefs, tk.NewRefs, before["refs/heads/dev"], newID)
		}
		got, err := lsRemote(f.base + "/" + f.key(2) + ".git")
		if err != nil || got["refs/heads/dev"] != newID {
			t.Fatalf("the full node does not serve the result of a done task: %v %v", got, err)
		}
		var again task
		if call(t, "GET", api+"/tasks/"+tk.ID, "", nil, &again); again.State != "done" {
			t.Fatalf("task lookup: %+v", again)
		}
	})

	t.Run("gitfleet ctl drives the running fleet", func(t *testing.T) {
		ctl := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(binary, append([]string{"ctl", "--server", f.base}, args...)...)
			cmd.Env = append(os.Environ(), "GITFLEET_TOKEN="+apiToken)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("ctl %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		var list struct {
			Total int `json:"total"`
		}
		if err := json.Unmarshal([]byte(ctl("repos", "--json")), &list); err != nil || list.Total != 7 {
			t.Fatalf("ctl repos --json: %v, total %d", err, list.Total)
		}
		if out := ctl("nodes"); strings.Count(out, "alive") != 3 {
			t.Fatalf("ctl nodes:\n%s", out)
		}
		newID, err := f.up.Commit(f.name(4), "main")
		if err != nil {
			t.Fatal(err)
		}
		if out := ctl("fetch", f.key(4), "--wait"); !strings.Contains(out, newID[:7]) {
			t.Fatalf("ctl fetch --wait does not show the new commit %s:\n%s", newID[:7], out)
		}
	})

	t.Run("webhooks from each host trigger a check and an event", func(t *testing.T) {
		ev := subscribe(t, f.base)
		for _, tc := range []struct{ host, file, fromURL, name string }{
			{"github", "github/push.json", "https://github.com/Codertocat/Hello-World", "Codertocat/Hello-World"},
			{"gitlab", "gitlab/push.json", "http://example.com/mike/diaspora", "mike/diaspora"},
			{"gitee", "gitee/push.json", "https://gitee.com/oschina/git-osc", "oschina/git-osc"},
		} {
			t.Run(tc.host, func(t *testing.T) {
				payload, err := os.ReadFile(filepath.Join("..", "..", "shared", "data", "webhooks", tc.file))
				if err != nil {
					t.Skip("shared webhook payloads not present")
				}
				if err := f.up.Create(tc.name, []string{"main"}, nil); err != nil {
					t.Fatal(err)
				}
				local := strings.TrimSuffix(f.up.RepoURL(tc.name), ".git")
				key := strings.TrimPrefix(local, "http://") // a host that does not fold case keeps it in keys
				var added map[string]any
				if code := call(t, "POST", api+"/repos", apiToken, strings.NewReader(`{"url":"`+local+`.git","attrs":{"via":"api"}}`), &added); code != 201 {
					t.Fatalf("add: %d %v", code, added)
				}
				eventually(t, 30*time.Second, "added repository served", func() error {
					_, err := lsRemote(f.base + "/" + key + ".git")
					return err
				})
				newID, err := f.up.Commit(tc.name, "main")
				if err != nil {
					t.Fatal(err)
				}
				body := bytes.ReplaceAll(payload, []byte(tc.fromURL), []byte(local))
				req, _ := http.NewRequest("POST", f.base+"/hooks/"+tc.host, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				switch tc.host {
				case "github":
					m := hmac.New(sha256.New, []byte(webhookSecret))
					m.Write(body)
					req.Header.Set("X-GitHub-Event", "push")
					req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
				case "gitlab":
					req.Header.Set("X-Gitlab-Event", "Push Hook")
					req.Header.Set("X-Gitlab-Token", webhookSecret)
				case "gitee":
					ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
					m := hmac.New(sha256.New, []byte(webhookSecret))
					m.Write([]byte(ts + "\n" + webhookSecret))
					req.Header.Set("X-Gitee-Event", "Push Hook")
					req.Header.Set("X-Gitee-Timestamp", ts)
					req.Header.Set("X-Gitee-Token", base64.StdEncoding.EncodeToString(m.Sum(nil)))
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 202 {
					t.Fatalf("webhook answered %d", resp.StatusCode)
				}
				eventually(t, 30*time.Second, "event announced", func() error { return ev.find(key, "refs/heads/main", newID) })
				got, _ := lsRemote(f.base + "/" + key + ".git")
				if got["refs/heads/main"] != newID {
					t.Fatalf("announced but not served: %v", got)
				}

				// The same delivery with a wrong secret is refused.
				req2, _ := http.NewRequest("POST", f.base+"/hooks/"+tc.host, bytes.NewReader(body))
				for k, v := range req.Header {
					req2.Header[k] = v
				}
				req2.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
				req2.Header.Set("X-Gitlab-Token", "wrong")
				req2.Header.Set("X-Gitee-Token", "wrong")
				resp2, err := http.DefaultClient.Do(req2)
				if err != nil {
					t.Fatal(err)
				}
				resp2.Body.Close()
				if resp2.StatusCode < 400 || resp2.StatusCode >= 500 {
					t.Fatalf("a forged delivery answered %d", resp2.StatusCode)
				}
			})
		}
	})

	t.Run("API changes survive restarts of every component", func(t *testing.T) {
		if err := f.up.Create("persist/added", []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
		addedURL := f.up.RepoURL("persist/added")
		added := strings.TrimSuffix(strings.TrimPrefix(addedURL, "http://"), ".git")
		if code := call(t, "POST", api+"/repos", apiToken, strings.NewReader(`{"url":"`+addedURL+`"}`), nil); code != 201 {
			t.Fatalf("add: %d", code)
		}
		eventually(t, 30*time.Second, "added repository served", func() error {
			_, err := lsRemote(f.base + "/" + added + ".git")
			return err
		})
		removed := f.key(3)
		if code := call(t, "DELETE", api+"/repos/"+removed, apiToken, nil, nil); code != 204 {
			t.Fatalf("delete: %d", code)
		}
		eventually(t, 30*time.Second, "deleted repository gone", func() error {
			resp, err := http.Get(f.base + "/" + removed + ".git/info/refs?service=git-upload-pack")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 404 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
		before, err := apiRepos(f.base)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"coordinator", "full", "partial-1", "partial-2"} {
			f.procs[name].kill()
		}
		f.startCoordinator()
		f.startFull()
		f.startNode("partial-1", "partial")
		f.startNode("partial-2", "partial")
		eventually(t, 60*time.Second, "state after restarts", func() error {
			repos, err := apiRepos(f.base)
			if err != nil {
				return err
			}
			if _, ok := repos[removed]; ok {
				return fmt.Errorf("%s came back after a restart", removed)
			}
			// Served, not necessarily current: the processes were killed, and
			// a verified_at of the last seconds before a crash may be lost
			// (current until the next verification).
			if r, ok := repos[added]; !ok || !r.Served || r.State != "ok" {
				return fmt.Errorf("%s (added through the API) not served after restarts: %+v", added, r)
			}
			if !maps.EqualFunc(repos, before, func(a, b apiRepo) bool { return a.Key == b.Key }) {
				return fmt.Errorf("repositories after restarts: %v, before: %v", slices.Collect(maps.Keys(repos)), slices.Collect(maps.Keys(before)))
			}
			return nil
		})
	})

	t.Run("purge protection holds a mass removal until an operator confirms it", func(t *testing.T) {
		f.writeCatalog([]int{0, 1}, "remove most of the catalog") // 4 of the catalog's repositories go
		var st struct {
			Commit  string `json:"commit"`
			Pending *struct {
				Removed int `json:"removed"`
			} `json:"pending_purge"`
		}
		eventually(t, 30*time.Second, "change held back", func() error {
			if code := call(t, "GET", api+"/catalog", "", nil, &st); code != 200 || st.Pending == nil {
				return fmt.Errorf("catalog status %d %+v", code, st)
			}
			return nil
		})
		if st.Pending.Removed != 3 { // 2, 4, 5 (3 was removed through the API)
			t.Fatalf("pending removal of %d, want 3", st.Pending.Removed)
		}
		if err := f.servedLikeUpstream([]int{2, 4, 5}); err != nil {
			t.Fatalf("a held-back removal was applied: %v", err)
		}
		// /metrics reuses the coordinator's answer for up to 2 s.
		eventually(t, 60*time.Second, "metrics show the held-back change", func() error {
			resp, err := http.Get(f.base + "/metrics")
			if err != nil {
				return err
			}
			metrics, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(metrics), "gitfleet_catalog_purge_pending 1") {
				return fmt.Errorf("metrics do not show the held-back change")
			}
			return nil
		})
		if code := call(t, "POST", api+"/catalog/confirm-purge", "", nil, nil); code != 401 {
			t.Fatalf("confirm without a token: %d", code)
		}
		if code := call(t, "POST", api+"/catalog/confirm-purge", apiToken, nil, nil); code != 200 {
			t.Fatalf("confirm: %d", code)
		}
		eventually(t, 30*time.Second, "confirmed removal applied", func() error {
			repos, err := apiRepos(f.base)
			if err != nil {
				return err
			}
			for _, i := range []int{2, 4, 5} {
				if _, ok := repos[f.key(i)]; ok {
					return fmt.Errorf("%s still listed", f.key(i))
				}
			}
			return nil
		})
		if code := call(t, "POST", api+"/catalog/confirm-purge", apiToken, nil, nil); code != 409 {
			t.Fatalf("a second confirmation: %d, want 409", code)
		}
	})
}
