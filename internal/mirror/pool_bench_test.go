package mirror_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
)

// countingProxy forwards to target and counts the bytes of its answers:
// what the mirrors downloaded from their upstreams.
func countingProxy(b testing.TB, target string) (*httptest.Server, *atomic.Int64) {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		r.Body = countingBody{r.Body, &n}
		return nil
	}
	srv := httptest.NewServer(rp)
	return srv, &n
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// benchForks makes n forks of the bare repository base among up's
// repositories (sharing its objects), each with a commit of its own
// (ownCommit), and returns their names.
func benchForks(b *testing.B, up *gittest.Upstreams, base string, n int) []string {
	var forks []string
	for i := range n {
		name := fmt.Sprintf("fork%03d", i)
		bare := filepath.Join(up.Dir, name+".git")
		if err := gittest.Git("", "clone", "-q", "--bare", "--shared", base, bare); err != nil {
			b.Fatal(err)
		}
		ownCommit(b, bare, i)
		forks = append(forks, name)
	}
	return forks
}

// benchStore opens a store in a directory of its own, closed when b ends.
func benchStore(b *testing.B) *mirror.Store {
	st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// ownCommit adds to the fork at bare a commit on its HEAD branch: a 32 KiB file
// of random bytes (incompressible: its own objects' size is known).
func ownCommit(b testing.TB, bare string, i int) {
	body := make([]byte, 32<<10)
	rand.Read(body)
	head, err := gittest.Output("", "--git-dir="+bare, "symbolic-ref", "HEAD")
	if err != nil {
		b.Fatal(err)
	}
	branch := strings.TrimSpace(head)
	var s strings.Builder
	fmt.Fprintf(&s, "commit %s\ncommitter A U Thor <a@example.org> %d +0000\ndata 4\nown\nfrom %s^0\n", branch, 1800000000+i, branch)
	fmt.Fprintf(&s, "M 100644 inline own-%d.bin\ndata %d\n%s\n", i, len(body), body)
	cmd := exec.Command("git", "--git-dir="+bare, "fast-import", "--quiet")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(s.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("fast-import: %v: %s", err, out)
	}
}

// serveRuns is how many clones of a member and of a standalone mirror,
// alternating, serveCPU's ratio is taken over: one is a few tens of
// milliseconds, and a shared machine's noise is not.
const serveRuns = 20

// serveCPU is the CPU (user and system) of the pack a full clone of the
// repository at dir asks for, as upload-pack makes it.
func serveCPU(b *testing.B, dir string) time.Duration {
	cmd := exec.Command("git", "--git-dir="+dir, "pack-objects", "--revs", "--all", "--stdout", "--delta-base-offset", "--use-bitmap-index", "-q")
	cmd.Env = gittest.Env()
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkNetwork mirrors N forks of one repository, each with 32 KiB of
// its own (a commit on the default branch), as one network. The repository
// is a synthetic one (about 4.5 MiB packed: 600 commits over 3,000 files),
// or the first that GITFLEET_BENCH_UPSTREAMS names (its branches and tags;
// it must be complete). It reports:
//   - disk/ideal: the data directory (mirrors and pool) over one standalone
//     mirror of the base plus the forks' own objects (goal <= 1.2);
//   - fetched/ideal: bytes downloaded from the upstreams over the base's
//     clone plus the forks' own objects (goal <= 1.2);
//   - cpu-member/standalone: the CPU of the pack of a full clone of one
//     member over one of a standalone mirror of the same fork (goal <= 1.2);
//   - convert-s: seconds to make N standalone mirrors of the forks one
//     network (JoinNetwork each).
func BenchmarkNetwork(b *testing.B) {
	for _, n := range benchsize.Of([]int{2, 20, 200}, []int{2}) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				benchNetwork(b, n)
			}
		})
	}
}

func benchNetwork(b *testing.B, n int) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	base := filepath.Join(up.Dir, "base.git")
	if src := strings.Fields(os.Getenv(benchUpstreamsEnv)); len(src) > 0 {
		if err := gittest.Git("", "clone", "-q", "--bare", "--no-local", src[0], base); err != nil {
			b.Fatalf("copy %s (it must be a complete repository): %v", src[0], err)
		}
	} else {
		synthRepo(b, up, "base", 600, 3000, 40)
	}
	if err := gittest.Git("", "--git-dir="+base, "repack", "-adq"); err != nil {
		b.Fatal(err)
	}
	forks := benchForks(b, up, base, n)
	proxy, fetched := countingProxy(b, up.URL)
	defer proxy.Close()
	ctx := context.Background()
	urlOf := func(name string) string { return proxy.URL + "/" + name + ".git" }

	// The ideal: one standalone mirror of the base, plus what each fork
	// adds to it (measured on a standalone mirror of one fork).
	ref := benchStore(b)
	if _, err := ref.Sync(ctx, keyOf(b, urlOf("base")), urlOf("base")); err != nil {
		b.Fatal(err)
	}
	baseBytes := fetched.Load()
	baseDisk := treeSize(b, ref.Path(keyOf(b, urlOf("base"))))
	fetched.Store(0)
	solo := keyOf(b, urlOf(forks[0]))
	if _, err := ref.Sync(ctx, solo, urlOf(forks[0])); err != nil {
		b.Fatal(err)
	}
	forkDisk := treeSize(b, ref.Path(solo))
	ownDisk := max(forkDisk-baseDisk, 0)
	ownBytes := max(fetched.Load()-baseBytes, 0)

	st := benchStore(b)
	fetched.Store(0)
	for _, f := range forks {
		if _, err := st.SyncIn(ctx, keyOf(b, urlOf(f)), urlOf(f), "base"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := st.Maintain(ctx, keyOf(b, urlOf(forks[0])), time.Hour); err != nil {
		b.Fatal(err)
	}
	disk := treeSize(b, filepath.Dir(st.Root()))
	b.ReportMetric(float64(disk)/float64(baseDisk+int64(n)*ownDisk), "disk/ideal")
	b.ReportMetric(float64(fetched.Load())/float64(baseBytes+int64(n)*ownBytes), "fetched/ideal")
	b.ReportMetric(float64(disk)/float64(1<<20), "disk-MiB")

	var member, standalone time.Duration
	for i := range benchsize.Of(serveRuns, 2) {
		if i%2 == 0 {
			member += serveCPU(b, st.Path(keyOf(b, urlOf(forks[0]))))
			standalone += serveCPU(b, ref.Path(solo))
		} else {
			standalone += serveCPU(b, ref.Path(solo))
			member += serveCPU(b, st.Path(keyOf(b, urlOf(forks[0]))))
		}
	}
	b.ReportMetric(float64(member)/float64(standalone), "cpu-member/standalone")

	conv := benchStore(b)
	for _, f := range forks {
		if _, err := conv.Sync(ctx, keyOf(b, urlOf(f)), urlOf(f)); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for _, f := range forks {
		if err := conv.JoinNetwork(ctx, keyOf(b, urlOf(f)), "base"); err != nil {
			b.Fatal(err)
		}
	}
	if err := conv.MaintainPool(ctx, "base"); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "convert-s")
}

func treeSize(b *testing.B, dir string) int64 {
	n, err := mirror.TreeSize(dir)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkNetworkPull is a full node that pulls N forks of one repository
// (synthetic, about 6 MiB packed, as BenchmarkNetwork's, each fork with
// 32 KiB of its own) from their owner through a proxy that counts the
// bytes (the owner's tunnel), into one pool, and a node that is then seeded
// with them from the full node (a move of the whole network). It reports:
//   - later-pulled/own: the bytes pulled for forks 2..N over their own
//     objects (a standalone pull of a fork less one of the base; goal about 1);
//   - pulled/ideal: the bytes pulled for all N over one standalone pull of
//     the base plus N forks' own (goal <= 1.2);
//   - later-seeded/own, seeded/ideal: the same for the seeds.
func BenchmarkNetworkPull(b *testing.B) {
	for _, n := range benchsize.Of([]int{20}, []int{2}) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				benchNetworkPull(b, n)
			}
		})
	}
}

func benchNetworkPull(b *testing.B, n int) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	synthRepo(b, up, "base", 600, 3000, 40)
	if err := gittest.Git("", "--git-dir="+filepath.Join(up.Dir, "base.git"), "repack", "-adq"); err != nil {
		b.Fatal(err)
	}
	forks := benchForks(b, up, filepath.Join(up.Dir, "base.git"), n)
	owner, pulled := countingProxy(b, up.URL)
	defer owner.Close()
	ctx := context.Background()
	pull := func(st *mirror.Store, name, network string) int64 {
		pulled.Store(0)
		src := mirror.Source{URL: owner.URL + "/" + name + ".git"}
		if _, err := st.PullVerifiedIn(ctx, keyOf(b, up.RepoURL(name)), network, src, upstreamOf(up, name)); err != nil {
			b.Fatal(err)
		}
		return pulled.Load()
	}
	ref := benchStore(b)
	base := pull(ref, "base", "")
	own := max(pull(ref, forks[0], "")-base, 1)

	full := benchStore(b)
	var first, later int64
	for i, f := range forks {
		if i == 0 {
			first = pull(full, f, "base")
		} else {
			later += pull(full, f, "base")
		}
	}
	b.ReportMetric(float64(later)/float64(int64(n-1)*own), "later-pulled/own")
	b.ReportMetric(float64(first+later)/float64(base+int64(n)*own), "pulled/ideal")
	b.ReportMetric(float64(first+later)/float64(1<<20), "pulled-MiB")

	seedBase, sent := fullNodeServer(b, full)
	moved := benchStore(b)
	first, later = 0, 0
	for i, f := range forks {
		key := keyOf(b, up.RepoURL(f))
		sent.Store(0)
		if _, err := moved.SyncIn(ctx, key, seedBase+"/"+string(key)+".git", "base"); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = sent.Load()
		} else {
			later += sent.Load()
		}
	}
	b.ReportMetric(float64(later)/float64(int64(n-1)*own), "later-seeded/own")
	b.ReportMetric(float64(first+later)/float64(base+int64(n)*own), "seeded/ideal")
}
