package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// An upstream force-pushes a commit away; once gitfleet up serves the new
// tip, and long before its prune (--prune-after's default hour), the old
// commit's blob and tree are refused by their ids in protocol v0 and v2
// (real git and a hand-written client), the old commit is not
// acknowledged as a have, the tip still clones, and the fetch log names
// the old commit only to the operator.
func TestObjectsThatAForcePushTookAwayAreNotServedBeforeThePrune(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	name := f.name(0)
	if err := f.up.Create(name, []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	f.writeCatalog([]int{0}, "one repository")
	data := filepath.Join(t.TempDir(), "up")
	start(t, "up", "up", "--data", data, "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token, "--api-token", apiToken,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
	eventually(t, 60*time.Second, "served by gitfleet up", func() error { return f.servedLikeUpstream([]int{0}) })

	bare := filepath.Join(f.up.Dir, name+".git")
	refs, err := f.up.Refs(name)
	if err != nil {
		t.Fatal(err)
	}
	kept := refs["refs/heads/main"]
	secret, err := f.up.AddBlob(name, "main", 2048)
	if err != nil {
		t.Fatal(err)
	}
	object := func(rev string) string {
		out, err := gittest.Output("", "--git-dir="+bare, "rev-parse", rev)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	blob, tree := object(secret+":big.bin"), object(secret+"^{tree}")
	eventually(t, 60*time.Second, "the secret served", func() error { return f.servedLikeUpstream([]int{0}) })
	if err := gittest.Git("", "--git-dir="+bare, "update-ref", "refs/heads/main", kept); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the force-push served", func() error { return f.servedLikeUpstream([]int{0}) })
	mirror := filepath.Join(data, "node", "repos", filepath.FromSlash(f.key(0))+".git")
	for _, oid := range []string{secret, tree, blob} {
		if err := gittest.Git("", "--git-dir="+mirror, "cat-file", "-e", oid); err != nil {
			t.Fatalf("%s is gone from the mirror's disk already: what follows would not test the check", oid)
		}
	}

	url := f.base + "/" + f.key(0) + ".git"
	post := func(body, gitProtocol string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"/git-upload-pack", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		if gitProtocol != "" {
			req.Header.Set("Git-Protocol", gitProtocol)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
	v2 := func(args ...string) string {
		s := pkt("command=fetch\n") + "0001"
		for _, a := range args {
			s += pkt(a + "\n")
		}
		return s + "0000"
	}
	for what, oid := range map[string]string{"blob": blob, "tree": tree} {
		if code, body := post(pkt("want "+oid+" ofs-delta\n")+"0000"+pkt("done\n"), ""); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
			t.Errorf("v0 want of the %s that the force-push took away: %d %.200q, want 403 not our ref", what, code, body)
		}
		if code, body := post(v2("want "+oid, "ofs-delta", "done"), "version=2"); code != http.StatusForbidden || !strings.Contains(body, "not our ref") {
			t.Errorf("v2 want of the %s that the force-push took away: %d %.200q, want 403 not our ref", what, code, body)
		}
		dir := t.TempDir()
		if err := gittest.Git(dir, "init", "-q", "--bare"); err != nil {
			t.Fatal(err)
		}
		if err := gittest.Git(dir, "-c", "protocol.version=2", "fetch", "-q", url, oid); err == nil {
			t.Errorf("git fetch of the %s that the force-push took away, by its id, succeeded", what)
		}
	}
	if code, body := post(v2("want "+kept, "have "+secret, "ofs-delta"), "version=2"); code != http.StatusOK || strings.Contains(body, "ACK "+secret) {
		t.Errorf("v2 negotiation with the old commit as a have: %d %.200q, want 200 and no ACK of it", code, body)
	}
	if code, body := post(pkt("want "+kept+" multi_ack_detailed ofs-delta\n")+"0000"+pkt("have "+secret+"\n")+"0000", ""); code != http.StatusOK || strings.Contains(body, "ACK "+secret) {
		t.Errorf("v0 negotiation with the old commit as a have: %d %.200q, want 200 and no ACK of it", code, body)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	if err := gittest.Git("", "clone", "-q", "--bare", url, clone); err != nil {
		t.Fatalf("clone of the tip after the force-push: %v", err)
	}
	if got, err := gittest.RefsOf(clone); err != nil || got["refs/heads/main"] != kept {
		t.Fatalf("the clone has %v (%v), want main %s", got, err, kept)
	}

	// The fetch log names the old commit to the operator alone.
	logURL := f.base + "/api/v1/log?key=" + f.key(0)
	eventually(t, 30*time.Second, "the operator's fetch log names the old commit", func() error {
		if _, b := send(t, http.MethodGet, logURL, apiToken, nil); !strings.Contains(string(b), `"old": "`+secret+`"`) &&
			!strings.Contains(string(b), `"old":"`+secret+`"`) {
			return fmt.Errorf("the log with the API token: %s", b)
		}
		return nil
	})
	// Without it, the entry of the force-push counts its rewrite and names
	// main's new tip, not its old one. (The entry of the fetch that brought
	// the commit in names it as main's new tip then: every listing did.)
	var page struct {
		Entries []struct {
			Kind     string `json:"kind"`
			Rewrites []struct {
				Old string `json:"old"`
			} `json:"rewrites"`
			RewritesOmitted int `json:"rewrites_omitted"`
			Moves           []struct {
				Ref, Old, New string
			} `json:"moves"`
		} `json:"entries"`
	}
	if code := call(t, http.MethodGet, logURL, "", nil, &page); code != http.StatusOK {
		t.Fatalf("the fetch log without the API token: %d", code)
	}
	found := false
	for _, e := range page.Entries {
		if len(e.Rewrites) > 0 {
			t.Errorf("the fetch log without the API token lists rewrites: %+v", e)
		}
		for _, m := range e.Moves {
			if m.Old == secret {
				t.Errorf("the fetch log without the API token names the old tip of the force-push: %+v", e)
			}
			found = found || (e.RewritesOmitted == 1 && m.Ref == "refs/heads/main" && m.New == kept)
		}
	}
	if !found {
		t.Errorf("the fetch log without the API token has no entry of the force-push (main to %s, a rewrite counted): %+v", kept, page)
	}
}
