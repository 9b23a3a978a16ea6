package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkPullUpdate measures what verification costs a full node's pull
// of one updated branch. Two full nodes' stores pull each update from the
// same owner, one verified and one not, in turn (so that both see the same
// machine). It reports the HTTP requests the upstream sees per pull of
// each kind (beside owner_req/update, those of the owner's own check that
// found the update), the time of each kind and their ratio. Run it with
// -benchtime 20x.
func BenchmarkPullUpdate(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	src, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(src.Close)
	if err := up.Create("a", []string{"main", "dev"}, []string{"v1", "v2"}); err != nil {
		b.Fatal(err)
	}
	// The upstream as the fleet reaches it: a git server of its own over
	// the same repository, counting every request.
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	var requests atomic.Int64
	serve := &gitserve.Handler{Git: git, Resolve: func(repokey.Key) (string, bool) { return filepath.Join(up.Dir, "a.git"), true }}
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		r.URL.Path = "/127.0.0.1" + r.URL.Path // a path the handler parses as a key
		serve.ServeHTTP(w, r)
	}))
	b.Cleanup(counting.Close)
	upURL := counting.URL + "/a.git"

	ctx := context.Background()
	// The owner: a mirror store of its own, served over HTTP.
	owner, err := mirror.Open(b.TempDir(), git, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	k, _, err := repokey.Normalize(upURL, repokey.Options{AllowPrivate: true})
	key := repokey.Key(k)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := owner.Sync(ctx, key, upURL); err != nil {
		b.Fatal(err)
	}
	if err := gittest.Git("", "clone", "-q", "--bare", owner.Path(key), filepath.Join(src.Dir, "a.git")); err != nil {
		b.Fatal(err)
	}
	srcURL := src.RepoURL("a")
	plain, err := mirror.Open(b.TempDir(), git, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	verified, err := mirror.Open(b.TempDir(), git, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	upstream := func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		return git.LsRemoteRefs(ctx, upURL, names)
	}
	// pull runs one kind of pull and returns its time and the upstream's requests.
	pull := func(verify bool) (time.Duration, int64) {
		before, start := requests.Load(), time.Now()
		var err error
		if verify {
			_, err = verified.PullVerified(ctx, key, mirror.Source{URL: srcURL}, upstream)
		} else {
			_, err = plain.Sync(ctx, key, srcURL)
		}
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start), requests.Load() - before
	}
	pull(false)
	pull(true)
	var ownerReq, req [2]int64
	var took [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := up.Commit("a", "main"); err != nil {
			b.Fatal(err)
		}
		before := requests.Load()
		if _, err := owner.Sync(ctx, key, upURL); err != nil {
			b.Fatal(err)
		}
		ownerReq[0] += requests.Load() - before
		// What the owner serves: its mirror, pushed to the source server.
		if err := gittest.Git(owner.Path(key), "push", "-q", "--mirror", filepath.Join(src.Dir, "a.git")); err != nil {
			b.Fatal(err)
		}
		for j := range 2 {
			verify := (i+j)%2 == 1 // each kind goes first in turn
			d, n := pull(verify)
			k := 0
			if verify {
				k = 1
			}
			took[k] += d
			req[k] += n
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(ownerReq[0])/n, "owner_req/update")
	b.ReportMetric(float64(req[0])/n, "unverified_upstream_req/pull")
	b.ReportMetric(float64(req[1])/n, "verified_upstream_req/pull")
	b.ReportMetric(float64(took[0].Milliseconds())/n, "unverified_ms/pull")
	b.ReportMetric(float64(took[1].Milliseconds())/n, "verified_ms/pull")
	b.ReportMetric(float64(took[1])/float64(took[0]), "verified/unverified")
}
