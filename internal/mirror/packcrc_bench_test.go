package mirror

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPackCheckCPU measures the CPU that reading every packed
// object's CRC (checkPackCRCs, what Verify adds) costs per MiB of pack,
// against the two git commands that find the same bit rot: git fsck (full
// pack checks) and git verify-pack, on the repository that
// GITFLEET_BENCH_REPO names (a bare repository; skipped without it but
// under -short, where it runs on a small one).
func BenchmarkPackCheckCPU(b *testing.B) {
	repo := os.Getenv("GITFLEET_BENCH_REPO")
	switch {
	case repo == "" && testing.Short():
		repo = smallPackedRepo(b)
	case repo == "":
		b.Skip("GITFLEET_BENCH_REPO names no repository")
	}
	idxs, _ := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.idx"))
	var packBytes int64
	for _, idx := range idxs {
		if fi, err := os.Stat(idx[:len(idx)-len(".idx")] + ".pack"); err == nil {
			packBytes += fi.Size()
		}
	}
	if packBytes == 0 {
		b.Skip("no pack in " + repo)
	}
	mib := float64(packBytes) / (1 << 20)
	b.Run("crc", func(b *testing.B) {
		before := cpuOf(syscall.RUSAGE_SELF)
		for b.Loop() {
			if bad, err := checkPackCRCs(repo); err != nil || bad != "" {
				b.Fatal(bad, err)
			}
		}
		b.ReportMetric(float64((cpuOf(syscall.RUSAGE_SELF)-before).Microseconds())/1000/float64(b.N)/mib, "cpu-ms/MiB")
	})
	for _, alt := range []struct {
		name string
		args []string
	}{
		{"fsck", []string{"fsck", "--no-dangling", "--no-progress"}},
		{"verify-pack", append([]string{"verify-pack"}, idxs...)},
	} {
		b.Run(alt.name, func(b *testing.B) {
			before := cpuOf(syscall.RUSAGE_CHILDREN)
			for b.Loop() {
				cmd := exec.Command("git", append([]string{"--git-dir=" + repo}, alt.args...)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
			b.ReportMetric(float64((cpuOf(syscall.RUSAGE_CHILDREN)-before).Microseconds())/1000/float64(b.N)/mib, "cpu-ms/MiB")
		})
	}
}

func cpuOf(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// smallPackedRepo is a bare repository of ten commits in one pack: the
// input of CI's run of every benchmark once (-short), where no repository
// is named.
func smallPackedRepo(b *testing.B) string {
	dir := filepath.Join(b.TempDir(), "small.git")
	var in strings.Builder
	for c := range 10 {
		body := strings.Repeat(fmt.Sprintf("line of commit %d\n", c), 200)
		fmt.Fprintf(&in, "commit refs/heads/main\ncommitter A U Thor <a@example.org> %d +0000\ndata 2\nc\nM 100644 inline f%d.txt\ndata %d\n%s\n",
			1700000000+c, c, len(body), body)
	}
	for _, args := range [][]string{{"init", "-q", "--bare", "-b", "main", dir}, {"--git-dir=" + dir, "fast-import", "--quiet"}, {"--git-dir=" + dir, "repack", "-adq"}} {
		cmd := exec.Command("git", args...)
		if args[1] == "fast-import" {
			cmd.Stdin = strings.NewReader(in.String())
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v: %s", args[1], err, out)
		}
	}
	return dir
}
