//go:build linux

package spawn

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The shell gitfleet started git through before this package, to compare.
const (
	shLimit = `ulimit -d "$1" || exit 125
shift
exec "$@"`
	shSupervise = `trap 'kill -KILL 0' TERM HUP INT
[ "$1" = 0 ] || ulimit -d "$1" || exit 125
shift
exec 3<&0
"$@" 0<&3 3<&- &
exec 3<&-
wait $!`
)

func viaShell(script string, deathSignal syscall.Signal) func(*exec.Cmd, int64) error {
	return func(cmd *exec.Cmd, limit int64) error {
		cmd.Args = append([]string{"/bin/sh", "-c", script, "gitfleet-git", strconv.FormatInt(limit>>10, 10), cmd.Path}, cmd.Args[1:]...)
		cmd.Path = "/bin/sh"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
		return cmd.Start()
	}
}

// BenchmarkStart is the cost of each way to start git under a memory
// limit, on what serving a clone starts with (git upload-pack
// --advertise-refs of a small repository): none (git alone, no limit),
// sh (the ulimit -d in a shell that gitfleet used before), traced (ptrace
// holds git at its exec while the parent sets the limit), re-executed
// (this program sets the limit on itself and becomes git); and for the
// supervised commands (fetch, ls-remote, clone): sh-supervisor (before),
// supervisor (traced) and supervisor-reexec (where ptrace is refused).
// The ways alternate in one run; each reports per git run its wall time
// (µs/WAY) and the CPU time of its processes and of the starting thread
// (cpu-µs/WAY). The re-executed ways start this test binary: gitfleet's
// own is larger, see the child package.
func BenchmarkStart(b *testing.B) {
	if !ptraceWorks() {
		b.Skip("ptrace is refused here")
	}
	repo := filepath.Join(b.TempDir(), "r.git")
	mustOutput(b, "init", "-q", "--bare", repo)
	tree := mustOutput(b, "--git-dir="+repo, "hash-object", "-w", "-t", "tree", "/dev/null")
	commit := mustOutput(b, "--git-dir="+repo, "commit-tree", "-m", "c", tree)
	mustOutput(b, "--git-dir="+repo, "update-ref", "refs/heads/main", commit)
	const limit = 2 << 30
	ways := []struct {
		name  string
		start func(*exec.Cmd, int64) error
	}{
		{"none", func(c *exec.Cmd, _ int64) error { return startInGroup(c, 0, false) }},
		{"sh", viaShell(shLimit, syscall.SIGKILL)},
		{"traced", func(c *exec.Cmd, l int64) error { return startInGroup(c, l, true) }},
		{"re-executed", func(c *exec.Cmd, l int64) error { return startInGroup(c, l, false) }},
		{"sh-supervisor", viaShell(shSupervise, syscall.SIGTERM)},
		{"supervisor", func(c *exec.Cmd, l int64) error { return startSupervisor(c, l, true) }},
		{"supervisor-reexec", func(c *exec.Cmd, l int64) error { return startSupervisor(c, l, false) }},
	}
	// The starting thread's CPU time is that of this goroutine alone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	run := func(start func(*exec.Cmd, int64) error, out *bytes.Buffer) (wall, cpu time.Duration) {
		cmd := exec.Command("git", "upload-pack", "--advertise-refs", repo)
		cmd.Env = gitEnv()
		if out != nil {
			cmd.Stdout = out
		}
		var before, after unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &before)
		t0 := time.Now()
		if err := start(cmd, limit); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		wall = time.Since(t0)
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &after)
		thread := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() + thread
	}
	var want bytes.Buffer
	run(ways[0].start, &want)
	for _, w := range ways {
		var got bytes.Buffer
		if run(w.start, &got); got.String() != want.String() {
			b.Fatalf("%s: %q, want %q", w.name, got.String(), want.String())
		}
	}
	wall, cpu := make([]time.Duration, len(ways)), make([]time.Duration, len(ways))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ways {
			k := (i + j) % len(ways)
			w, c := run(ways[k].start, nil)
			wall[k] += w
			cpu[k] += c
		}
	}
	for k, w := range ways {
		b.ReportMetric(float64(wall[k].Microseconds())/float64(b.N), "µs/"+w.name)
		b.ReportMetric(float64(cpu[k].Microseconds())/float64(b.N), "cpu-µs/"+w.name)
	}
}

func mustOutput(b *testing.B, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append(gitEnv(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git %v: %v", args, err)
	}
	return string(bytes.TrimSpace(out))
}
