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
// considered). Skipped without GITFLEET_BENCH_REPO.
func BenchmarkCheckAnswerCPU(b *testing.B) {
	repo := os.Getenv("GITFLEET_BENCH_REPO")
	if repo == "" {
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
