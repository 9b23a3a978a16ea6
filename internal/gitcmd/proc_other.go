//go:build !linux

package gitcmd

import "syscall"

// command runs git directly: without Pdeathsig there is nothing for a
// supervisor to hear.
func command(_, git string, args []string, _ int64) (string, []string) {
	return git, args
}

// sysProcAttr puts git in its own process group, so that a timeout kills
// its helpers too. Only Linux can also tie the child's life to its parent.
func sysProcAttr(string) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// MemoryLimitSupported reports whether a git process's memory can be
// bounded on this system.
const MemoryLimitSupported = false
