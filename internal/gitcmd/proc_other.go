//go:build !linux

package gitcmd

import (
	"os/exec"
	"syscall"
)

// start starts git in its own process group, so that a timeout kills its
// helpers too. Only Linux can also tie the child's life to its parent
// (without that, a supervisor would hear nothing) and bound its memory.
func start(cmd *exec.Cmd, _ string, _ int64) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}

// MemoryLimitSupported reports whether a git process's memory can be
// bounded on this system.
const MemoryLimitSupported = false
