package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One repository, one key, its own content (issue 21, items 1-3), against
// `gitfleet up` with real upstreams on a case-sensitive git server:
//   - u/Case.git and u/case.git are two repositories, served apart;
//   - a second upstream for a key already held is refused with 409, the
//     same URL again is an idempotent 200;
//   - percent-encoded separators are refused in the API, the catalog and
//     the public edge's git paths;
//   - a catalog line with credentials is skipped and its secret shows
//     nowhere: not in the log, not in the public catalog status.
func TestEveryRepositoryHasItsOwnKeyAndNoSecretLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	for _, name := range []string{"u/Case", "u/case"} {
		if err := f.up.Create(name, []string{"main"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.up.Commit("u/case", "main"); err != nil { // the two never share a tip
		t.Fatal(err)
	}
	host := strings.TrimPrefix(f.up.URL, "http://")
	const secret = "ghp_SECRETsecretSECRETsecretSECRET123456"
	f.writeFile("lists/a.list", strings.Join([]string{
		f.up.RepoURL("u/Case"),
		f.up.RepoURL("u/case"),
		"https://user:" + secret + "@" + host + "/s/x.git",
		f.up.URL + "/u%2fa.git",
		"",
	}, "\n"))
	f.commitCatalog("two repositories that differ in case, and two hostile lines")
	const token = "e2e-api-token"
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token, "--api-token", token,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")

	// 1. Two keys, each with its own content.
	eventually(t, 60*time.Second, "u/Case and u/case served apart", func() error {
		for _, name := range []string{"u/Case", "u/case"} {
			want, err := f.up.Refs(name)
			if err != nil {
				return err
			}
			got, err := lsRemote(f.base + "/" + host + "/" + name + ".git")
			if err != nil {
				return err
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("%s: mirror serves %v, upstream has %v", name, got, want)
			}
		}
		return nil
	})
	repos, err := apiRepos(f.base)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := repos[host+"/u/Case"]; !ok {
		t.Fatalf("the API has no key %s/u/Case: %v", host, repos)
	}

	// 2. A second upstream for a held key is a collision; the same URL is
	// idempotent; another spelling on a case-sensitive host is another key.
	post := func(url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, f.base+"/api/v1/repos", strings.NewReader(fmt.Sprintf(`{"url":%q}`, url)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(f.up.RepoURL("col2/Foo")); code != http.StatusCreated {
		t.Fatalf("add col2/Foo: %d %s", code, body)
	}
	if code, body := post(f.up.RepoURL("col2/Foo")); code != http.StatusOK {
		t.Fatalf("add col2/Foo again: %d %s", code, body)
	}
	if code, body := post(f.up.RepoURL("col2/foo")); code != http.StatusCreated {
		t.Fatalf("add col2/foo, another repository: %d %s", code, body)
	}
	// https on the same port names the same key with another upstream.
	code, body := post("https://" + host + "/col2/Foo.git")
	var e struct{ Code, Error string }
	_ = json.Unmarshal([]byte(body), &e)
	if code != http.StatusConflict || e.Code != "key_collision" {
		t.Fatalf("add col2/Foo over https: %d %s, want 409 key_collision", code, body)
	}

	// Percent-encoded separators: refused by the API and the public edge.
	if code, body := post(f.up.URL + "/u%2fa.git"); code != http.StatusBadRequest {
		t.Fatalf("add u%%2fa: %d %s", code, body)
	}
	for _, p := range []string{"/u%2fa.git", "/u%2Fa.git", "/u/%2e%2e/case.git", "/u%5ca.git", "/u/a%00.git"} {
		resp, err := http.Get(f.base + "/" + host + p + "/info/refs?service=git-upload-pack")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", p, resp.StatusCode)
		}
	}

	// 3. The credential line and the encoded line are problems, shown
	// without the secret.
	var cat struct {
		Problems []string `json:"problem_lines"`
	}
	eventually(t, 30*time.Second, "the catalog's problems listed", func() error {
		resp, err := http.Get(f.base + "/api/v1/catalog")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		cat.Problems = nil
		if err := json.NewDecoder(resp.Body).Decode(&cat); err != nil {
			return err
		}
		if len(cat.Problems) < 2 {
			return fmt.Errorf("problems %v", cat.Problems)
		}
		return nil
	})
	all := strings.Join(cat.Problems, "\n")
	if strings.Contains(all, "SECRET") || !strings.Contains(all, "REDACTED") || !strings.Contains(all, "percent") {
		t.Fatalf("problem lines: %s", all)
	}
	if n := up.count("SECRET"); n != 0 {
		t.Fatalf("the log holds the secret %d times", n)
	}
	b, err := os.ReadFile(up.log)
	if err != nil || !strings.Contains(string(b), "REDACTED") {
		t.Fatalf("the log never mentions the redacted line (%v)", err)
	}
}
