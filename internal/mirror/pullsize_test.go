package mirror_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// A hostile source answers the quarantine fetch with a pack that never
// ends: the pull is stopped while it streams, near --max-repo-size, its
// data dropped, and the mirror served as it was.
func TestPullVerifiedFromASourceServingAnEndlessPackIsStoppedAtMaxRepoSize(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	const limit = 4 << 20
	r.st.SetLimits(mirror.Limits{MaxRepoSize: limit})
	before := r.served()
	packs := entries(t, filepath.Join(r.st.Path(r.key), "objects", "pack"))
	r.forge("main") // so that the fetch wants something
	endless, err := r.src.StartEndless()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(endless.Close)
	asked := r.asked
	_, err = r.st.PullVerified(context.Background(), r.key, mirror.Source{URL: endless.RepoURL("a")}, r.upstream)
	if !errors.Is(err, mirror.ErrPullTooLarge) || gitcmd.ClassOf(err) != gitcmd.ClassTooLarge {
		t.Fatalf("want a pull stopped as too large, got %v (fetches %d, sent %d)", err, endless.Fetches.Load(), endless.Sent.Load())
	}
	if endless.Fetches.Load() != 1 {
		t.Fatalf("%d fetches answered, want 1", endless.Fetches.Load())
	}
	// The source sees its client hang up: it has stopped sending.
	deadline := time.Now().Add(time.Minute)
	for endless.Done.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if endless.Done.Load() != 1 {
		t.Fatal("the source is still sending")
	}
	sent := endless.Sent.Load()
	t.Logf("the source sent %d bytes against a limit of %d", sent, limit)
	if sent < limit {
		t.Fatalf("stopped after %d bytes, below the limit %d", sent, limit)
	}
	if r.asked != asked {
		t.Fatal("a pull stopped while fetching asked the upstream")
	}
	if !reflect.DeepEqual(r.served(), before) {
		t.Fatalf("served refs moved: %v, want %v", r.served(), before)
	}
	if got := entries(t, filepath.Join(r.st.Path(r.key), "objects", "pack")); !reflect.DeepEqual(got, packs) {
		t.Fatalf("the mirror's packs are %v, were %v", got, packs)
	}
	r.noQuarantineLeft()
}

// A source that serves an honest but larger pack than the limit (a
// volunteer with a larger --max-repo-size) is stopped the same way, on a
// first pull too.
func TestPullVerifiedOfARepositoryLargerThanMaxRepoSizeKeepsNothing(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.up.AddBlob("a", "main", 3<<20); err != nil {
		t.Fatal(err)
	}
	r.follow()
	r.st.SetLimits(mirror.Limits{MaxRepoSize: 1 << 20})
	_, err := r.pull()
	if !errors.Is(err, mirror.ErrPullTooLarge) {
		t.Fatalf("want a pull stopped as too large, got %v", err)
	}
	if r.st.Has(r.key) {
		t.Fatal("a first pull over the limit created the mirror")
	}
	r.noQuarantineLeft()
	// Within the limit, the same pull lands.
	r.st.SetLimits(mirror.Limits{MaxRepoSize: 64 << 20})
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.served(), r.upRefs()) {
		t.Fatalf("served %v, upstream %v", r.served(), r.upRefs())
	}
	r.noQuarantineLeft()
}

// A source that trickles its pack holds the pull no longer than the git
// timeout (--git-timeout), as an upstream's fetch.
func TestPullVerifiedFromATricklingSourceEndsAtTheGitTimeout(t *testing.T) {
	t.Parallel()
	r := newPullRig(t)
	if _, err := r.pull(); err != nil {
		t.Fatal(err)
	}
	before := r.served()
	if _, err := r.src.AddBlob("a", "main", 1<<20); err != nil {
		t.Fatal(err)
	}
	trickle := slow(t, r.src, 4<<10)
	st, err := mirror.Open(r.data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{Timeout: 2 * time.Second}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.PullVerified(context.Background(), r.key, mirror.Source{URL: trickle.RepoURL("a")}, r.upstream)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the pull ended by the git timeout, got %v", err)
	}
	if !reflect.DeepEqual(r.served(), before) {
		t.Fatalf("served refs moved: %v, want %v", r.served(), before)
	}
	r.noQuarantineLeft()
}
