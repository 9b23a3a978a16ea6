package gitserve_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkMemberWants compares what serving costs a member of an object
// pool (whose trees and blobs are checked against its own refs, with the
// pool's bitmap) and a standalone mirror of the same fork (checked
// against its refs too, with its own bitmap), on a synthetic history (200
// files, 1,000 commits):
//
//   - lazyblob: a partial clone's lazy fetch of one blob of history, a
//     different one each time (no answer kept from before helps); for a
//     member before its pool's repack (no bitmap: the check lists what the
//     refs reach) and after (with the pool's bitmap);
//   - clone: a whole fetch of the fork's tip, whose wants are commits
//     only (no new check), the answer made anew each time.
func BenchmarkMemberWants(b *testing.B) {
	n := newForkNetwork(b, synthHistory(b, 200, 1000), nil)
	ctx := context.Background()
	solo, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { solo.Close() })
	if _, err := solo.Sync(ctx, repokey.Key(n.keys["a"]), n.up.RepoURL("a")); err != nil {
		b.Fatal(err)
	}
	if _, err := solo.Maintain(ctx, repokey.Key(n.keys["a"]), 0); err != nil {
		b.Fatal(err)
	}
	soloURL := serveDir(b, solo.Path(repokey.Key(n.keys["a"])))

	out, err := gittest.Output("", "--git-dir="+filepath.Join(n.up.Dir, "a.git"), "log", "--format=", "--raw", "--no-abbrev", "main")
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var blobs []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && gitcmd.IsOID(f[3]) && !seen[f[3]] && f[3] != strings.Repeat("0", 40) {
			seen[f[3]] = true
			blobs = append(blobs, f[3])
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(blobs), func(i, j int) { blobs[i], blobs[j] = blobs[j], blobs[i] })
	next := 0
	lazyBlob := func(url string) func(b *testing.B) {
		return func(b *testing.B) {
			for range b.N {
				blob := blobs[next%len(blobs)]
				next++
				fetchOK(b, url, v2Fetch("want "+blob, "ofs-delta", "no-progress", "done"))
			}
		}
	}
	clone := func(url string) func(b *testing.B) {
		return func(b *testing.B) {
			body := v2Fetch("want "+n.object(b, "a", "main"), "ofs-delta", "no-progress", "done")
			for range b.N {
				fetchOK(b, url, body)
			}
		}
	}
	memberURL := n.f.url
	b.Run("lazyblob/member-nobitmap", lazyBlob(memberURL))
	if err := n.st.MaintainPool(ctx, "base"); err != nil {
		b.Fatal(err)
	}
	b.Run("lazyblob/member", lazyBlob(memberURL))
	b.Run("lazyblob/standalone", lazyBlob(soloURL))
	b.Run("clone/member", clone(memberURL))
	b.Run("clone/standalone", clone(soloURL))
}

// serveDir serves the bare repository dir as example.com/a, and returns
// its clone URL.
func serveDir(b *testing.B, dir string) string {
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Resolve: func(key repokey.Key) (string, bool) {
		return dir, key == "example.com/a"
	}}
	h.TipGrace = -1
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL + "/example.com/a.git"
}

// fetchOK posts a protocol v2 fetch and reads its whole answer.
func fetchOK(b *testing.B, url string, body []byte) {
	req, err := http.NewRequest(http.MethodPost, url+"/git-upload-pack", strings.NewReader(string(body)))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Git-Protocol", "version=2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "PACK") {
		b.Fatalf("fetch: %d %v %.200q", resp.StatusCode, err, got)
	}
}
