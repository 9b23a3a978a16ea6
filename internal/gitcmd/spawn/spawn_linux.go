//go:build linux

package spawn

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"github.com/gitfleet/gitfleet/internal/gitcmd/spawn/child"
)

// Start starts cmd, whose Path and Args are git's, in a process group of
// its own that the kernel kills when gitfleet dies, with its data segment
// bounded by limit bytes (RLIMIT_DATA; 0: none) from before its first
// instruction.
//
// With supervise, git runs under a supervisor (this program started again)
// that leads the group: when gitfleet dies the kernel signals the
// supervisor, and it kills the whole group. Pdeathsig alone reaches only
// the direct child, and git's remote helper (git-remote-https) orphaned
// while its upstream stalls would live on until curl's low-speed timeout.
//
// Start sets cmd.SysProcAttr; the caller waits for cmd as usual. Killing
// the group (-cmd.Process.Pid) ends git, its helpers and any supervisor.
func Start(cmd *exec.Cmd, limit int64, supervise bool) error {
	traced := limit > 0 && ptraceWorks()
	if supervise {
		return startSupervisor(cmd, limit, traced)
	}
	return startInGroup(cmd, limit, traced)
}

// startInGroup starts cmd under limit in a group of its own, to be killed
// with this process.
func startInGroup(cmd *exec.Cmd, limit int64, traced bool) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	switch {
	case limit <= 0:
		return cmd.Start()
	case traced:
		return startTraced(cmd, limit)
	}
	// The child sets the limit on itself and becomes git.
	reexec(cmd, "gitfleet-git", child.ModeExec, limit)
	return cmd.Start()
}

// startSupervisor starts cmd under a supervisor; traced: the supervisor
// sets git's limit with ptrace, else through a child of its own.
func startSupervisor(cmd *exec.Cmd, limit int64, traced bool) error {
	mode := child.ModeSupervise
	if limit > 0 && !traced {
		mode = child.ModeSuperviseReexec
	}
	reexec(cmd, "gitfleet-git-supervisor", mode, limit)
	// SIGTERM, not SIGKILL: the supervisor must live to kill the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	return cmd.Start()
}

// reexec makes cmd start this program in mode, which then runs git (the
// former Path and Args, passed on unchanged) under limit.
func reexec(cmd *exec.Cmd, name, mode string, limit int64) {
	cmd.Path, cmd.Args = child.Reexec(name, mode, limit, cmd.Path, cmd.Args)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], child.Env+"="+mode)
}

// startTraced starts cmd stopped by ptrace on its way out of execve, sets
// its data limit and lets it go: no instruction of git (nor of its dynamic
// loader) runs before the limit is in force.
func startTraced(cmd *exec.Cmd, limit int64) error {
	return startStopped(cmd, func(pid int) error { return child.SetDataLimit(pid, limit) })
}

// startStopped starts cmd under ptrace, calls atExec while the child is
// stopped on its way out of execve and lets it go (see child.Release).
func startStopped(cmd *exec.Cmd, atExec func(pid int) error) error {
	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Ptrace = true
	cmd.SysProcAttr = &attr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	if err := child.Release(pid, atExec); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("spawn: starting %s (pid %d) under its limit: %w", cmd.Path, pid, err)
	}
	return nil
}

// ptraceWorks reports whether a traced start works here: a seccomp
// profile may refuse ptrace, and a process under a debugger cannot trace
// its own children. Asked once, by starting this program in
// child.ModeProbe.
var ptraceWorks = sync.OnceValue(func() bool {
	cmd := &exec.Cmd{Path: child.Self, Args: []string{"gitfleet-git-probe"}, Env: []string{child.Env + "=" + child.ModeProbe},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := startTraced(cmd, 1<<40); err != nil {
		return false
	}
	return cmd.Wait() == nil
})
