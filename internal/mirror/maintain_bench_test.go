package mirror_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// BenchmarkCloneAfterFetches measures what a clone costs the server (the
// user and system CPU of git upload-pack and its pack-objects, and the wall
// time) from one medium mirror (2,000 commits over 5,000 files, about
// 49,000 objects, maintained once after its clone) in three states, in
// turn in one run: after 200 small fetches (a pack each, as a node fetches
// with --max-repo-size set); the same after one Maintain run (incremental:
// geometric repack, multi-pack-index bitmap, commit graph); the same after
// `git repack -adb` (the goal: maintained within 1.2x of it).
func BenchmarkCloneAfterFetches(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *mirror.Store {
		st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
		if err != nil {
			b.Fatal(err)
		}
		st.SetLimits(mirror.Limits{MaxRepoSize: 10 << 30}) // every fetch a pack, as on a node
		return st
	}
	name := synthRepo(b, up, "medium", 2000, 5000, 10)
	bare := filepath.Join(up.Dir, name+".git")
	url := up.RepoURL(name)
	key := repokey.Key(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git"))
	st := open()
	if _, err := st.Sync(ctx, key, url); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Maintain(ctx, key, week); err != nil { // maintained since its clone
		b.Fatal(err)
	}
	for i := range benchsize.Of(200, 3) {
		smallCommit(b, bare, i)
		if _, err := st.Sync(ctx, key, url); err != nil {
			b.Fatal(err)
		}
	}
	variants := []struct {
		name string
		dir  string
	}{{name: "fetched"}, {name: "maintained"}, {name: "repack-adb"}}
	setup := map[string]float64{} // reported at the end: ResetTimer drops metrics
	for i := range variants {
		s := open()
		dst := s.Path(key)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", st.Path(key), dst).CombinedOutput(); err != nil {
			b.Fatalf("copy the mirror: %v: %s", err, out)
		}
		variants[i].dir = dst
		start, cpu0 := time.Now(), childCPU(b)
		switch variants[i].name {
		case "maintained":
			rep, err := s.Maintain(ctx, key, week)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Full {
				b.Fatal("the run after the fetches was a full one: the benchmark is of the incremental run")
			}
		case "repack-adb":
			if err := gittest.Git("", "--git-dir="+dst, "repack", "-adbq"); err != nil {
				b.Fatal(err)
			}
		default:
			continue
		}
		setup["ms-run-"+variants[i].name] = float64(time.Since(start).Milliseconds())
		setup["cpu-ms-run-"+variants[i].name] = float64((childCPU(b) - cpu0).Milliseconds())
	}
	for _, v := range variants {
		sh, err := mirror.Probe(v.dir)
		if err != nil {
			b.Fatal(err)
		}
		setup["packs-"+v.name] = float64(sh.Packs)
	}
	want := wantLines(b, st.Path(key))
	cpu := make([]time.Duration, len(variants))
	wall := make([]time.Duration, len(variants))
	for _, v := range variants { // warm the page cache
		uploadPack(b, v.dir, want)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range variants {
			k := (i + j) % len(variants) // each state first in turn
			c, w := uploadPack(b, variants[k].dir, want)
			cpu[k] += c
			wall[k] += w
		}
	}
	b.StopTimer()
	for k, v := range variants {
		b.ReportMetric(float64(cpu[k].Milliseconds())/float64(b.N), "cpu-ms-"+v.name)
	}
	for k, v := range setup {
		b.ReportMetric(v, k)
	}
	b.ReportMetric(float64(cpu[0])/float64(cpu[2]), "cpu-fetched/adb")
	b.ReportMetric(float64(cpu[1])/float64(cpu[2]), "cpu-maintained/adb")
	b.ReportMetric(float64(wall[1])/float64(wall[2]), "wall-maintained/adb")
}

// smallCommit commits a change to 2 files on main of the bare repository,
// with git fast-import: a fetch of a few objects.
func smallCommit(b *testing.B, bare string, i int) {
	b.Helper()
	var s strings.Builder
	fmt.Fprintf(&s, "commit refs/heads/main\ncommitter A U Thor <a@example.org> %d +0000\ndata 7\nsmall\n\nfrom refs/heads/main^0\n", 1800000000+i)
	for j := 0; j < 2; j++ {
		body := fmt.Sprintf("small change %d.%d\n", i, j)
		fmt.Fprintf(&s, "M 100644 inline dir%02d/file%05d.txt\ndata %d\n%s", (i+j)%50, (i*7+j)%5000, len(body), body)
	}
	cmd := exec.Command("git", "--git-dir="+bare, "fast-import", "--quiet", "--force")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(s.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("fast-import: %v: %s", err, out)
	}
}

// wantLines is the protocol v0 request of a clone of every branch and tag
// of dir.
func wantLines(b *testing.B, dir string) string {
	b.Helper()
	refs, err := gittest.RefsOf(dir)
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var oids []string
	for _, oid := range refs {
		if !seen[oid] {
			seen[oid] = true
			oids = append(oids, oid)
		}
	}
	sort.Strings(oids)
	pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
	var req strings.Builder
	for i, oid := range oids {
		line := "want " + oid
		if i == 0 {
			line += " multi_ack_detailed side-band-64k thin-pack ofs-delta no-progress agent=gitfleet-bench"
		}
		req.WriteString(pkt(line + "\n"))
	}
	req.WriteString("0000")
	req.WriteString(pkt("done\n"))
	return req.String()
}

// uploadPack serves the clone request want from dir as the full node does
// (git upload-pack --stateless-rpc), discards the pack, and returns the CPU
// of upload-pack and the pack-objects it waited for, and the wall time.
func uploadPack(b *testing.B, dir, want string) (cpu, wall time.Duration) {
	b.Helper()
	cmd := exec.Command("git", "upload-pack", "--stateless-rpc", dir)
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(want)
	n := &countingWriter{}
	cmd.Stdout = n
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("upload-pack %s: %v: %s", dir, err, stderr.String())
	}
	wall = time.Since(start)
	if n.n < 1<<10 {
		b.Fatalf("upload-pack %s sent %d bytes: not a clone", dir, n.n)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), wall
}

// childCPU is the user and system CPU of the waited-for children of the
// process so far (the git processes of Maintain and of repack).
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
