package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkPullUpdate measures what verification costs a full node's pull
// of one updated branch: the HTTP requests the upstream sees per pull
// (upstream_req/pull), beside those of the owner's own check that found the
// update (owner_req/update), and the time of a pull, with and without
// verification. Run it with -benchtime 20x.
func BenchmarkPullUpdate(b *testing.B) {
	for _, verified := range []bool{false, true} {
		name := "unverified"
		if verified {
			name = "verified"
		}
		b.Run(name, func(b *testing.B) { benchPullUpdate(b, verified) })
	}
}

func benchPullUpdate(b *testing.B, verified bool) {
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
	// The upstream as the fleet reaches it, counting every request.
	var requests atomic.Int64
	target, _ := url.Parse(up.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	b.Cleanup(counting.Close)
	upURL := counting.URL + "/a.git"

	git := &gitcmd.Runner{}
	ctx := context.Background()
	// The owner: a mirror store of its own, served over HTTP.
	owner, err := mirror.Open(b.TempDir(), git, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	key, _, err := repokey.Normalize(upURL, repokey.Options{AllowPrivate: true})
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
	full, err := mirror.Open(b.TempDir(), git, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	upstream := func(ctx context.Context, names []string) (gitcmd.Refs, error) {
		return git.LsRemoteRefs(ctx, upURL, names)
	}
	pull := func() error {
		if verified {
			_, err := full.PullVerified(ctx, key, mirror.Source{URL: srcURL}, upstream)
			return err
		}
		_, err := full.Sync(ctx, key, srcURL)
		return err
	}
	if err := pull(); err != nil {
		b.Fatal(err)
	}
	var ownerReq, pullReq int64
	var pullTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := up.Commit("a", "main"); err != nil {
			b.Fatal(err)
		}
		before := requests.Load()
		if _, err := owner.Sync(ctx, key, upURL); err != nil {
			b.Fatal(err)
		}
		ownerReq += requests.Load() - before
		// What the owner serves: its mirror, pushed to the source server.
		if err := gittest.Git(owner.Path(key), "push", "-q", "--mirror", filepath.Join(src.Dir, "a.git")); err != nil {
			b.Fatal(err)
		}
		before = requests.Load()
		start := time.Now()
		b.StartTimer()
		if err := pull(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		pullTime += time.Since(start)
		pullReq += requests.Load() - before
	}
	b.ReportMetric(float64(pullReq)/float64(b.N), "upstream_req/pull")
	b.ReportMetric(float64(ownerReq)/float64(b.N), "owner_req/update")
	b.ReportMetric(float64(pullTime.Milliseconds())/float64(b.N), "ms/pull")
}
