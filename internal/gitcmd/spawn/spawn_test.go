//go:build linux

package spawn

import (
	"bytes"
	"crypto/rand"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gitfleet/gitfleet/internal/gitcmd/spawn/child"
	"golang.org/x/sys/unix"
)

// A way to start git under a limit: each that Start may choose.
type mechanism struct {
	name   string
	traced bool // needs ptrace
	start  func(cmd *exec.Cmd, limit int64) error
}

var mechanisms = []mechanism{
	{"traced", true, func(c *exec.Cmd, l int64) error { return startInGroup(c, l, true) }},
	{"re-executed", false, func(c *exec.Cmd, l int64) error { return startInGroup(c, l, false) }},
	{"supervised traced", true, func(c *exec.Cmd, l int64) error { return startSupervisor(c, l, true) }},
	{"supervised re-executed", false, func(c *exec.Cmd, l int64) error { return startSupervisor(c, l, false) }},
}

func forEachMechanism(t *testing.T, f func(t *testing.T, m mechanism)) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			if m.traced && !ptraceWorks() {
				t.Skip("ptrace is refused here: Start re-executes instead")
			}
			f(t, m)
		})
	}
}

// gitEnv is a plain environment for git, as gitcmd gives it one.
func gitEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0"}
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs git with args and stdin through start (nil: directly), under limit.
func run(t *testing.T, start func(*exec.Cmd, int64) error, limit int64, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = gitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var err error
	if start == nil {
		err = cmd.Start()
	} else {
		err = start(cmd, limit)
	}
	if err != nil {
		t.Fatalf("starting git %v: %v", args, err)
	}
	_ = cmd.Wait()
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// Under a 64 KiB limit git never reaches its own code. That is less than
// git's own data segment (about 250 KiB) and its libraries': the kernel
// refuses to load it (re-executed: the limit is set before execve), or its
// dynamic loader fails to map its libraries (traced: the limit is set as
// execve returns, before the loader's first instruction). Either way it
// dies without a word, where a git that ran and then met the limit would
// say "fatal: Out of memory" (as it does under 384 KiB). Under a normal
// limit it runs.
func TestTheLimitIsInForceBeforeGitsFirstInstruction(t *testing.T) {
	forEachMechanism(t, func(t *testing.T, m mechanism) {
		r := run(t, m.start, 64<<10, nil, "version")
		if r.code == 0 || r.stdout != "" || strings.Contains(r.stderr, "fatal:") {
			t.Fatalf("git ran under a 64 KiB limit: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		t.Logf("under 64 KiB: exit %d, stderr %q", r.code, r.stderr)
		if r := run(t, m.start, 64<<20, nil, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "git version ") {
			t.Fatalf("under a 64 MiB limit: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// The traced start sets the limit while git stands at the first
// instruction of the new program (its dynamic loader's entry point): the
// kernel holds the limit before anything of git has run.
func TestTheTracedLimitIsSetAtTheLoadersFirstInstruction(t *testing.T) {
	if !ptraceWorks() {
		t.Skip("ptrace is refused here")
	}
	const limit = 48 << 20
	var pc, entry uint64
	var limits []byte
	cmd := exec.Command("git", "version")
	err := startStopped(cmd, func(pid int) error {
		if err := child.SetDataLimit(pid, limit); err != nil {
			return err
		}
		var regs syscall.PtraceRegs
		if err := syscall.PtraceGetRegs(pid, &regs); err != nil {
			return err
		}
		pc = regs.PC()
		var err error
		entry, err = entryPoint(pid)
		if err != nil {
			return err
		}
		limits, err = os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "limits"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("git version after its release: %v", err)
	}
	t.Logf("held at %#x, the loader starts at %#x", pc, entry)
	if pc != entry {
		t.Errorf("git was held at %#x, not at the first instruction of the new program (%#x)", pc, entry)
	}
	want := []string{"Max", "data", "size", strconv.Itoa(limit), strconv.Itoa(limit), "bytes"}
	for _, line := range strings.Split(string(limits), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "data" {
			if strings.Join(f, " ") != strings.Join(want, " ") {
				t.Errorf("the kernel holds %q, want %q", line, strings.Join(want, " "))
			}
			return
		}
	}
	t.Errorf("no data limit in %s", limits)
}

// entryPoint is where the program that pid has just executed starts: its
// dynamic loader's entry point, or its own for a static program.
func entryPoint(pid int) (uint64, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	auxv, err := os.ReadFile(filepath.Join(dir, "auxv"))
	if err != nil {
		return 0, err
	}
	const atBase, atEntry = 7, 9
	vals := map[uint64]uint64{}
	for i := 0; i+16 <= len(auxv); i += 16 {
		vals[binary.NativeEndian.Uint64(auxv[i:])] = binary.NativeEndian.Uint64(auxv[i+8:])
	}
	if vals[atBase] == 0 {
		return vals[atEntry], nil
	}
	prog, err := elf.Open(filepath.Join(dir, "exe"))
	if err != nil {
		return 0, err
	}
	defer prog.Close()
	for _, p := range prog.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		path, err := io.ReadAll(p.Open())
		if err != nil {
			return 0, err
		}
		interp, err := elf.Open(strings.TrimRight(string(path), "\x00"))
		if err != nil {
			return 0, err
		}
		defer interp.Close()
		return vals[atBase] + interp.Entry, nil
	}
	return 0, fmt.Errorf("a loader at %#x, but no PT_INTERP in the program", vals[atBase])
}

// git reads a blob from a pipe into memory: 16 MiB cannot be had under an
// 8 MiB limit, and can under 64 MiB.
func TestGitUnderTheLimitCannotAllocateMoreThanIt(t *testing.T) {
	blob := make([]byte, 16<<20)
	_, _ = rand.Read(blob)
	want := run(t, nil, 0, blob, "hash-object", "--stdin")
	if want.code != 0 {
		t.Fatalf("without a limit: %+v", want)
	}
	forEachMechanism(t, func(t *testing.T, m mechanism) {
		r := run(t, m.start, 8<<20, blob, "hash-object", "--stdin")
		if r.code == 0 || !strings.Contains(r.stderr, "Out of memory") {
			t.Fatalf("16 MiB read under an 8 MiB limit: exit %d, stderr %q", r.code, r.stderr)
		}
		if r := run(t, m.start, 64<<20, blob, "hash-object", "--stdin"); r != want {
			t.Fatalf("under a 64 MiB limit: %+v, want %+v", r, want)
		}
	})
}

// git gets its arguments, standard input and exit status as if started
// directly, and never sees the variable that selects the child's side.
func TestGitRunsAsIfStartedDirectly(t *testing.T) {
	odd := []string{"rev-parse", "--sq-quote", "a b", "", "--end-of-options", "-c", "x=y", "it's", `"q"`, "$HOME", "tab\there",
		"new\nline", "ünïcödé", "*", "--", "gitfleet-git", "-"}
	for _, tc := range []struct {
		name  string
		stdin []byte
		args  []string
	}{
		{"odd arguments", nil, odd},
		{"standard input", []byte("some bytes\n"), []string{"hash-object", "--stdin"}},
		{"a failure's exit status", nil, []string{"--git-dir=/nonexistent", "rev-parse", "HEAD"}},
	} {
		want := run(t, nil, 0, tc.stdin, tc.args...)
		t.Run(tc.name, func(t *testing.T) {
			forEachMechanism(t, func(t *testing.T, m mechanism) {
				got := run(t, m.start, 1<<30, tc.stdin, tc.args...)
				if got != want {
					t.Fatalf("got %+v\nwant %+v", got, want)
				}
			})
		})
	}
	t.Run("the environment", func(t *testing.T) {
		forEachMechanism(t, func(t *testing.T, m mechanism) {
			cmd := exec.Command("env")
			var out bytes.Buffer
			cmd.Stdout = &out
			cmd.Env = []string{"MARK=1"}
			if err := m.start(cmd, 1<<30); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil || out.String() != "MARK=1\n" {
				t.Fatalf("env: %q, %v; want MARK=1 alone", out.String(), err)
			}
		})
	})
}

// The child's side runs only under its own program: a shell that sets the
// variable gets a refusal, not git.
func TestTheChildsSideIsSelectedOnlyByThisProgram(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `"$0" 0 /bin/echo echo ran; exit $?`, os.Args[0])
	cmd.Env = []string{child.Env + "=" + child.ModeExec}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 125 || strings.Contains(string(out), "ran") ||
		!strings.Contains(string(out), "not started by gitfleet") {
		t.Fatalf("exit %d (%v), output %q; want a refusal (125)", code, err, out)
	}
}

// helperEnv makes this test binary play gitfleet: it starts git ls-remote
// of the URL in the variable under a supervisor (traced or not) and waits.
const helperEnv = "SPAWN_TEST_PLAY_GITFLEET"

// refusedEnv makes this test binary a gitfleet that ptrace is refused to
// (a seccomp filter, as a container's): it says whether a traced start
// works, and starts cat /proc/self/limits under limits of 48 MiB, then 40
// MiB supervised.
const refusedEnv = "SPAWN_TEST_PTRACE_REFUSED"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		how, url, _ := strings.Cut(v, " ")
		cmd := exec.Command("git", "ls-remote", "--", url+"/stalled.git")
		cmd.Env = gitEnv()
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := startSupervisor(cmd, 1<<30, how == "traced"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = cmd.Wait()
		os.Exit(0)
	}
	if os.Getenv(refusedEnv) != "" {
		if err := refusePtrace(); err != nil {
			fmt.Fprintln(os.Stderr, "seccomp:", err)
			os.Exit(1)
		}
		fmt.Printf("a traced start works: %v\n", ptraceWorks())
		for _, supervise := range []bool{false, true} {
			limit := int64(48 << 20)
			if supervise {
				limit = 40 << 20
			}
			cmd := exec.Command("cat", "/proc/self/limits")
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := Start(cmd, limit, supervise); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			if err := cmd.Wait(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refusePtrace installs a seccomp filter on every thread of this process,
// and so on its children, that fails ptrace(2) with EPERM.
func refusePtrace() error {
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the system call's number
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_PTRACE, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return errno
	}
	return nil
}

// Where ptrace is refused, Start finds out and sets the limit through a
// re-executed child, supervised or not.
func TestWherePtraceIsRefusedTheLimitIsSetByAReexecutedChild(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), refusedEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var limits []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "data" {
			limits = append(limits, strings.Join(f, " "))
		}
	}
	want := []string{"Max data size 50331648 50331648 bytes", "Max data size 41943040 41943040 bytes"}
	if !strings.HasPrefix(string(out), "a traced start works: false\n") || strings.Join(limits, "|") != strings.Join(want, "|") {
		t.Fatalf("output:\n%s\nwant no traced start, then the limits %q", out, want)
	}
}

// A gitfleet killed with SIGKILL takes git's remote helper, waiting on a
// stalled upstream, along: the supervisor kills the whole group.
func TestAKilledParentTakesGitsRemoteHelperAlong(t *testing.T) {
	url := stallingUpstream(t)
	for _, how := range []string{"traced", "re-executed"} {
		t.Run(how, func(t *testing.T) {
			if how == "traced" && !ptraceWorks() {
				t.Skip("ptrace is refused here")
			}
			gitfleet := exec.Command(os.Args[0])
			gitfleet.Env = append(os.Environ(), helperEnv+"="+how+" "+url)
			if err := gitfleet.Start(); err != nil {
				t.Fatal(err)
			}
			var procs map[int]string
			waitFor(t, "git's remote helper waiting on the stalled upstream", func() error {
				procs = descendants(gitfleet.Process.Pid)
				for _, cmd := range procs {
					if strings.Contains(cmd, "remote-http") && strings.Contains(cmd, "stalled") {
						return nil
					}
				}
				return fmt.Errorf("processes: %v", procs)
			})
			if err := gitfleet.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = gitfleet.Wait()
			waitFor(t, "every process gone", func() error {
				for pid, cmd := range procs {
					if alive(pid) {
						return fmt.Errorf("pid %d still runs: %s", pid, cmd)
					}
				}
				return nil
			})
			supervised := false
			for _, cmd := range procs {
				supervised = supervised || strings.HasPrefix(cmd, "gitfleet-git-supervisor ")
			}
			if !supervised {
				t.Errorf("no supervisor among %v", procs)
			}
			t.Logf("%d processes (supervisor, git, remote helper) ended with their gitfleet", len(procs))
		})
	}
}

// stallingUpstream accepts connections and never answers.
func stallingUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stat is a process's state and parent, from /proc (ok: it exists).
func stat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// alive reports whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	state, _, ok := stat(pid)
	return ok && state != "Z"
}

// descendants lists the live processes below pid, with their command lines.
func descendants(pid int) map[int]string {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, ppid, ok := stat(p); ok && state != "Z" {
			parent[p] = ppid
		}
	}
	out := map[int]string{}
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
				out[p] = strings.ReplaceAll(string(cmd), "\x00", " ")
				break
			}
		}
	}
	return out
}
