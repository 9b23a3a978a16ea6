//go:build linux

package child

import (
	"errors"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// Env selects the child's side in a process that spawn started from its
// own executable; its value is the mode. git never sees it.
const Env = "GITFLEET_GITCMD_SPAWN"

// The modes. Each but ModeProbe takes the arguments LIMIT (bytes; 0: none),
// GIT (its path) and git's argv, which pass on unchanged.
const (
	// ModeExec sets the limit on itself and becomes git.
	ModeExec = "exec"
	// ModeSupervise starts git in its own group, its limit set with ptrace
	// (see Release), and kills the group when signalled.
	ModeSupervise = "supervise"
	// ModeSuperviseReexec supervises as ModeSupervise, git started through
	// a child of ModeExec: ptrace is refused here.
	ModeSuperviseReexec = "supervise-reexec"
	// ModeProbe exits at once: spawn's test of a traced start.
	ModeProbe = "probe"
)

// Self is this program's executable, also after its file was replaced or
// removed (an upgrade under a running node).
const Self = "/proc/self/exe"

// Reexec returns the program and arguments that run git (path, with
// argv) through this program in mode, under limit. The caller adds
// Env=mode to the environment.
func Reexec(name, mode string, limit int64, path string, argv []string) (string, []string) {
	return Self, append([]string{name, strconv.FormatInt(limit, 10), path}, argv...)
}

// init is the child's side. In a child it never returns. Test binaries of
// packages that import gitcmd get it too, so they run git as gitfleet does.
func init() {
	mode, ok := os.LookupEnv(Env)
	if !ok {
		return
	}
	os.Exit(run(mode, os.Args))
}

func run(mode string, args []string) int {
	if !startedBySelf() {
		return fail(Env + " is set, but this process was not started by gitfleet: unset it")
	}
	if mode == ModeProbe {
		return 0
	}
	if len(args) < 4 {
		return fail(Env + "=" + mode + ": want the arguments LIMIT GIT ARGV0 [ARG...]")
	}
	limit, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return fail(Env + "=" + mode + ": bad limit: " + err.Error())
	}
	git, argv := args[2], args[3:]
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		// (Not strings.HasPrefix: package strings starts late, see the
		// package comment.)
		if len(kv) <= len(Env) || kv[:len(Env)+1] != Env+"=" {
			env = append(env, kv)
		}
	}
	switch mode {
	case ModeExec:
		if limit > 0 {
			lim := syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
			if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &lim); err != nil {
				return fail("setting the data limit of git to " + args[1] + " bytes: " + err.Error())
			}
		}
		err := syscall.Exec(git, argv, env)
		fail("exec " + git + ": " + err.Error())
		return 127
	case ModeSupervise, ModeSuperviseReexec:
		return supervise(limit, mode == ModeSupervise, git, argv, env)
	}
	return fail("unknown " + Env + "=" + mode)
}

// fail says msg on standard error and returns 125, the status of a
// failure before git ran.
func fail(msg string) int {
	os.Stderr.WriteString("gitfleet: " + msg + "\n")
	return 125
}

// startedBySelf reports whether the parent runs this program's executable:
// only gitfleet selects the child's side, never an environment that
// happens to hold Env.
func startedBySelf() bool {
	me, err := os.Stat(Self)
	if err != nil {
		return false
	}
	parent, err := os.Stat("/proc/" + strconv.Itoa(os.Getppid()) + "/exe")
	return err == nil && os.SameFile(me, parent)
}

// supervise runs git in this process's group, which gitfleet made, and
// kills the whole group when gitfleet dies (Pdeathsig: SIGTERM) or the
// group is told to end. It exits as git did (128+N: signal N, as a shell
// says it).
func supervise(limit int64, traced bool, git string, argv, env []string) int {
	// A signal that comes before git started waits in the channel.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	p, err := startGit(limit, traced, git, argv, env)
	if err != nil {
		fail(err.Error())
		return 127
	}
	done := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := p.Wait()
		done <- st
	}()
	var st *os.ProcessState
	select {
	case <-sigs:
		_ = syscall.Kill(0, syscall.SIGKILL)
		return 128 + int(syscall.SIGKILL) // not reached: the group includes this process
	case st = <-done:
	}
	if st == nil {
		return 125
	}
	ws := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// startGit starts git in this process's group, gone if this process is,
// under limit: traced (see Release), or through a child of ModeExec.
func startGit(limit int64, traced bool, git string, argv, env []string) (*os.Process, error) {
	attr := &os.ProcAttr{Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	switch {
	case limit <= 0:
		return os.StartProcess(git, argv, attr)
	case !traced:
		path, args := Reexec("gitfleet-git", ModeExec, limit, git, argv)
		attr.Env = append(env, Env+"="+ModeExec)
		return os.StartProcess(path, args, attr)
	}
	attr.Sys.Ptrace = true
	// The tracer is the thread that started the child: see Release.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess(git, argv, attr)
	if err != nil {
		return nil, err
	}
	if err := Release(p.Pid, func(pid int) error { return SetDataLimit(pid, limit) }); err != nil {
		_ = p.Kill()
		_, _ = p.Wait()
		return nil, err
	}
	return p, nil
}

// Release waits for pid, a child started with SysProcAttr.Ptrace, which
// PTRACE_TRACEME stops with SIGTRAP on its way out of execve, before its
// first instruction; calls atExec then; and detaches from it. It must run
// on the thread that started the child (runtime.LockOSThread before the
// start): that thread is the tracer, and only the tracer may detach. The
// thread must be unlocked, not ended, after: Pdeathsig follows the thread
// that started the child.
func Release(pid int, atExec func(pid int) error) error {
	first := true
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err == syscall.EINTR {
			continue
		} else if err != nil {
			return &os.SyscallError{Syscall: "wait4", Err: err}
		}
		if !ws.Stopped() {
			// Killed in the meantime (a cancelled context): its status is
			// taken, so say it here.
			return errors.New("it ended before it ran (" + describe(ws) + ")")
		}
		if first {
			if err := atExec(pid); err != nil {
				return err
			}
			first = false
		}
		if sig := ws.StopSignal(); sig != syscall.SIGTRAP {
			// A signal came before execve's SIGTRAP: deliver it. The
			// SIGTRAP, still pending, stops the child again before it
			// runs; left to an untraced child it would kill it.
			if err := syscall.PtraceCont(pid, int(sig)); err != nil {
				return &os.SyscallError{Syscall: "ptrace(PTRACE_CONT)", Err: err}
			}
			continue
		}
		if err := syscall.PtraceDetach(pid); err != nil {
			return &os.SyscallError{Syscall: "ptrace(PTRACE_DETACH)", Err: err}
		}
		return nil
	}
}

func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// SetDataLimit sets the data-segment limit (RLIMIT_DATA, soft and hard) of
// process pid to limit bytes: prlimit(2), which package syscall lacks.
func SetDataLimit(pid int, limit int64) error {
	lim := syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_DATA,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		return &os.SyscallError{Syscall: "prlimit", Err: errno}
	}
	return nil
}
