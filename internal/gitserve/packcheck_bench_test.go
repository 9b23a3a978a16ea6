package gitserve

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCheckAnswerCPU measures the CPU that checkAnswer costs per MiB
// of a full clone's answer (upload-pack v0, ofs-delta, no side-band) of
// the repository GITFLEET_BENCH_REPO names, against git upload-pack making
// that answer and git index-pack reading its pack (the other check
// considered). Skipped without GITFLEET_BENCH_REPO, but under -short, where
// it runs on a small repository.
func BenchmarkCheckAnswerCPU(b *testing.B) {
	repo := os.Getenv("GITFLEET_BENCH_REPO")
	switch {
	case repo == "" && testing.Short():
		repo = smallPackedRepo(b)
	case repo == "":
		b.Skip("GITFLEET_BENCH_REPO names no repository")
	}
	head, err := exec.Command("git", "--git-dir="+repo, "rev-parse", "HEAD").Output()
	if err != nil {
		b.Fatal(err)
	}
	want := fmt.Sprintf("want %s ofs-delta\n", strings.TrimSpace(string(head)))
	req := fmt.Sprintf("%04x%s0000%04xdone\n", len(want)+4, want, len("done\n")+4)
	uploadPack := func() []byte {
		cmd := exec.Command("git", "upload-pack", "--stateless-rpc", repo)
		cmd.Stdin = strings.NewReader(req)
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	answer := uploadPack()
	i := bytes.Index(answer, []byte("PACK"))
	if i < 0 {
		b.Fatal("no pack in the answer")
	}
	pack := filepath.Join(b.TempDir(), "a.pack")
	if err := os.WriteFile(pack, answer[i:], 0o600); err != nil {
		b.Fatal(err)
	}
	mib := float64(len(answer)) / (1 << 20)
	report := func(b *testing.B, who int, run func()) {
		before := rusageOf(who)
		for b.Loop() {
			run()
		}
		b.ReportMetric(float64((rusageOf(who)-before).Microseconds())/1000/float64(b.N)/mib, "cpu-ms/MiB")
	}
	b.Run("check", func(b *testing.B) {
		report(b, syscall.RUSAGE_SELF, func() {
			if err := checkAnswer(bytes.NewReader(answer)); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("upload-pack", func(b *testing.B) { report(b, syscall.RUSAGE_CHILDREN, func() { uploadPack() }) })
	b.Run("index-pack", func(b *testing.B) {
		report(b, syscall.RUSAGE_CHILDREN, func() {
			idx := filepath.Join(b.TempDir(), "a.idx")
			if out, err := exec.Command("git", "index-pack", "-o", idx, pack).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		})
	})
}

func rusageOf(who int) time.Duration {
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
