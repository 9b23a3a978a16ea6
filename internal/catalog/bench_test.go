package catalog

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// BenchCatalog returns the git directory and commit of a catalog of n
// entries in .list files of perFile lines, generated under b.TempDir (so
// that a run leaves nothing behind).
func benchCatalog(b *testing.B, n, perFile int) (gitDir, commit string) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "catalog")
	commit, err := Generate(context.Background(), testGit, dir, n, perFile)
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, ".git"), commit
}

// benchChange makes (once) a commit on top of base that changes 100
// entries in 10 files: 5 lines removed and 5 added in each.
func benchChange(b *testing.B, gitDir, base string, n, perFile int) string {
	b.Helper()
	ctx := context.Background()
	ref := "refs/heads/bench-change-" + base[:12]
	if c, err := resolveCommit(ctx, testGit, gitDir, ref); err == nil {
		return c
	}
	err := fastImport(ctx, testGit, gitDir, func(w *bufio.Writer) {
		const msg = "change 100 entries\n"
		fmt.Fprintf(w, "commit %s\ncommitter %s\ndata %d\n%sfrom %s\n", ref, genIdentity, len(msg), msg, base)
		for f := range 10 {
			content := appendGenList(nil, f*perFile+5, perFile-5)
			for j := range 5 {
				content = appendGenURL(content, n+f*5+j)
				content = append(content, '\n')
			}
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", genPath(f), len(content), content)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	c, err := resolveCommit(ctx, testGit, gitDir, ref)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// catFileAlone is how long `git cat-file --batch` alone takes to read every
// blob of commit (the best of three runs).
func catFileAlone(b *testing.B, gitDir, commit string) time.Duration {
	b.Helper()
	ctx := context.Background()
	blobs, err := lsTree(ctx, testGit, gitDir, commit, "")
	if err != nil {
		b.Fatal(err)
	}
	var in bytes.Buffer
	for _, bl := range blobs {
		in.WriteString(bl.oid + "\n")
	}
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		err := testGit.Run(ctx, gitcmd.Cmd{GitDir: gitDir, Name: "cat-file", Flags: []string{"--batch", "--buffer"},
			Stdin: bytes.NewReader(in.Bytes()), Stdout: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// peakRSS resets the kernel's peak resident size of this process (when
// it lets us) and returns a function that reads it, in MB.
func peakRSS() func() (float64, bool) {
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) != nil {
		return func() (float64, bool) { return 0, false }
	}
	return func() (float64, bool) {
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return 0, false
		}
		for l := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				return float64(kb) / 1024, err == nil
			}
		}
		return 0, false
	}
}

func liveHeapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkLoad is a cold load (parse, normalise, index) of a generated
// catalog of .list files of 1,000 lines, against cat-file alone.
//
//	go test -run='^$' -bench=Load -benchtime=3x ./internal/catalog/
func BenchmarkLoad(b *testing.B) {
	for _, n := range benchsize.Of([]int{100_000, 1_000_000}, []int{10_000}) {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			gitDir, commit := benchCatalog(b, n, 1000)
			cat := catFileAlone(b, gitDir, commit)

			base := liveHeapMB()
			readPeak := peakRSS()
			c, err := Load(ctx, testGit, gitDir, commit, Options{})
			if err != nil || c.Len() != n {
				b.Fatalf("Load: %v, %d entries", err, c.Len())
			}
			peak, peakOK := readPeak()
			heap := liveHeapMB() - base
			runtime.KeepAlive(c)
			c = nil

			b.ResetTimer()
			for b.Loop() {
				if _, err = Load(ctx, testGit, gitDir, commit, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(cat), "x-catfile")
			b.ReportMetric(cat.Seconds()*1000, "catfile-ms")
			b.ReportMetric(float64(n)/perOp.Seconds(), "entries/s")
			b.ReportMetric(heap, "heap-MB")
			if peakOK {
				b.ReportMetric(peak, "peak-RSS-MB")
			}
		})
	}
}

// BenchmarkUpdate applies a commit that changes 100 entries (in 10 files)
// to catalogs of growing size: its time must not grow with them.
//
//	go test -run='^$' -bench=Update ./internal/catalog/
func BenchmarkUpdate(b *testing.B) {
	for _, n := range benchsize.Of([]int{10_000, 100_000, 1_000_000}, []int{10_000}) {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			gitDir, base := benchCatalog(b, n, 1000)
			next := benchChange(b, gitDir, base, n, 1000)
			old, err := Load(ctx, testGit, gitDir, base, Options{})
			if err != nil {
				b.Fatal(err)
			}
			var d Delta
			for b.Loop() {
				if _, d, err = old.Update(ctx, testGit, gitDir, next); err != nil {
					b.Fatal(err)
				}
			}
			if len(d.Added) != 50 || len(d.Removed) != 50 || len(d.Changed) != 0 {
				b.Fatalf("delta: %d added, %d removed, %d changed; want 50, 50, 0", len(d.Added), len(d.Removed), len(d.Changed))
			}
			b.ReportMetric(float64(len(d.Added)+len(d.Removed)), "changed-entries")
		})
	}
}

// BenchmarkLoadCompassLayout loads a catalog of one YAML file per
// repository, laid out like Compass-CI's upstream-repos.
//
//	go test -run='^$' -bench=CompassLayout -benchtime=3x ./internal/catalog/
func BenchmarkLoadCompassLayout(b *testing.B) {
	n := benchsize.Of(100_000, 1000)
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "catalog")
	gitDir := filepath.Join(dir, ".git")
	if err := testGit.Run(ctx, gitcmd.Cmd{Name: "init", Flags: []string{"--quiet", "--initial-branch=main"}, Args: []string{dir}}); err != nil {
		b.Fatal(err)
	}
	err := fastImport(ctx, testGit, gitDir, func(w *bufio.Writer) {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter %s\ndata 4\ngen\n", genIdentity)
		for i := range n {
			name := fmt.Sprintf("pkg-%06d", i)
			body := fmt.Sprintf("---\nurl:\n- https://gitee.com/src-openeuler/%s.git\n", name)
			fmt.Fprintf(w, "M 100644 inline %c/%s/%s\ndata %d\n%s\n", 'a'+i%26, name, name, len(body), body)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	base := liveHeapMB()
	var c *Catalog
	for b.Loop() {
		var err error
		if c, err = Load(ctx, testGit, gitDir, "main", Options{}); err != nil || c.Len() != n {
			b.Fatalf("Load: %v", err)
		}
	}
	b.ReportMetric(liveHeapMB()-base, "heap-MB")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	runtime.KeepAlive(c)
}

// BenchmarkListedHalf loads and updates a catalog of n entries of which
// half come from listers (n/2000 lister lines of 1,000 repositories
// each, listed in memory as the coordinator keeps them), against a plain
// catalog of n entries: the load (Load, then AddListings) and a commit
// that changes 100 entries (Update, then WithListings of the same
// listings, as the coordinator applies one), each as a multiple of the
// plain catalog's.
//
//	go test -run='^$' -bench=ListedHalf -benchtime=3x ./internal/catalog/
func BenchmarkListedHalf(b *testing.B) {
	n := benchsize.Of(1_000_000, 10_000)
	ctx := context.Background()
	plainDir, plainBase := benchCatalog(b, n, 1000)
	plainNext := benchChange(b, plainDir, plainBase, n, 1000)
	halfDir, halfBase := benchCatalog(b, n/2, 1000)
	listers := n / 2000
	var lines bytes.Buffer
	listings := make(map[string][]Listed, listers)
	for i := range listers {
		owner := fmt.Sprintf("lister-%04d", i)
		fmt.Fprintf(&lines, "https://github.com/%s/*\n", owner)
		repos := make([]Listed, 1000)
		for j := range repos {
			repos[j] = Listed{Name: fmt.Sprintf("%s/repo-%07d", owner, i*1000+j)}
		}
		listings["https://github.com/"+owner+"/*"] = repos
	}
	err := fastImport(ctx, testGit, halfDir, func(w *bufio.Writer) {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter %s\ndata 8\nlisters\nfrom %s\nM 100644 inline listers.list\ndata %d\n%s\n", genIdentity, halfBase, lines.Len(), lines.Bytes())
	})
	if err != nil {
		b.Fatal(err)
	}
	halfBase, err = resolveCommit(ctx, testGit, halfDir, "refs/heads/main")
	if err != nil {
		b.Fatal(err)
	}
	halfNext := benchChange(b, halfDir, halfBase, n/2, 1000)
	loadHalf := func() *Catalog {
		c, err := Load(ctx, testGit, halfDir, halfBase, Options{})
		if err != nil {
			b.Fatal(err)
		}
		c = c.AddListings(listings)
		if c.Len() != n {
			b.Fatalf("%d entries, want %d", c.Len(), n)
		}
		return c
	}
	loadPlain := func() *Catalog {
		c, err := Load(ctx, testGit, plainDir, plainBase, Options{})
		if err != nil || c.Len() != n {
			b.Fatalf("Load: %v, %d entries", err, c.Len())
		}
		return c
	}
	best := func(f func()) time.Duration {
		d := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			f()
			d = min(d, time.Since(start))
		}
		return d
	}
	var plainLoad, halfLoad, plainUpdate, halfUpdate time.Duration
	for b.Loop() {
		// Alternated, each the best of three, so that a machine's load
		// weighs on both alike.
		plainLoad = best(func() { loadPlain() })
		halfLoad = best(func() { loadHalf() })
		plain, half := loadPlain(), loadHalf()
		plainUpdate = best(func() {
			if _, _, err := plain.Update(ctx, testGit, plainDir, plainNext); err != nil {
				b.Fatal(err)
			}
		})
		halfUpdate = best(func() {
			next, d, err := half.Update(ctx, testGit, halfDir, halfNext)
			if err != nil {
				b.Fatal(err)
			}
			if _, d2 := next.WithListings(listings); len(d.Added) == 0 || len(d2.Added)+len(d2.Removed) != 0 {
				b.Fatalf("delta %d added, then %d more", len(d.Added), len(d2.Added)+len(d2.Removed))
			}
		})
	}
	b.ReportMetric(plainLoad.Seconds(), "plain-load-s")
	b.ReportMetric(halfLoad.Seconds(), "listed-load-s")
	b.ReportMetric(float64(halfLoad)/float64(plainLoad), "load-x-plain")
	b.ReportMetric(plainUpdate.Seconds()*1000, "plain-update-ms")
	b.ReportMetric(halfUpdate.Seconds()*1000, "listed-update-ms")
	b.ReportMetric(float64(halfUpdate)/float64(plainUpdate), "update-x-plain")
}
