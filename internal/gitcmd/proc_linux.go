//go:build linux

package gitcmd

import (
	"strconv"
	"syscall"
)

// upstreamFacing are the subcommands whose helpers (git-remote-https) wait
// on the network. The others' helpers (pack-objects, index-pack) end when
// their pipes to git close.
var upstreamFacing = map[string]bool{"fetch": true, "ls-remote": true, "clone": true}

// superviseScript runs git under a small sh that is the process group's
// leader: when the kernel tells it that gitfleet died (Pdeathsig, SIGTERM),
// it kills the whole group, git's remote helper included. Pdeathsig alone
// reaches only the direct child, and a remote helper orphaned while its
// upstream stalls would live on until curl's low-speed timeout. A
// non-interactive sh gives a background job /dev/null as stdin: fd 3
// carries the real one. "$1" is the data limit in KiB (0: none).
const superviseScript = `trap 'kill -KILL 0' TERM HUP INT
[ "$1" = 0 ] || ulimit -d "$1" || exit 125
shift
exec 3<&0
"$@" 0<&3 3<&- &
exec 3<&-
wait $!`

// limitScript runs git with a data limit in KiB ("$1"), set by the shell
// before git starts, so that nothing git allocates escapes it (a limit set
// on the process after the start raced with git's first allocations).
const limitScript = `ulimit -d "$1" || exit 125
shift
exec "$@"`

// command is the program and arguments that run git with args for the
// subcommand sub, under limit bytes of data segment (0: none). The limit is
// RLIMIT_DATA (ulimit -d: the heap and private writable mappings), not
// RLIMIT_AS: git maps pack files read-only, and those maps count against
// the address space but not the data segment, so a limit on the address
// space would break any repository with a pack larger than it, while this
// one bounds only what git allocates.
func command(sub, git string, args []string, limit int64) (string, []string) {
	kib := "0"
	if limit > 0 {
		kib = strconv.FormatInt(max(limit>>10, 1), 10)
	}
	switch {
	case upstreamFacing[sub]:
		return "/bin/sh", append([]string{"-c", superviseScript, "gitfleet-git", kib, git}, args...)
	case limit > 0:
		return "/bin/sh", append([]string{"-c", limitScript, "gitfleet-git", kib, git}, args...)
	}
	return git, args
}

// sysProcAttr puts git (or its supervisor, see command) in its own process
// group, so that a timeout kills its helpers too, and has the kernel
// signal it when gitfleet dies, so that a killed node leaves no git behind:
// SIGKILL for git itself, SIGTERM for the supervisor, which kills the group.
func sysProcAttr(sub string) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if upstreamFacing[sub] {
		sig = syscall.SIGTERM
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

// MemoryLimitSupported reports whether a git process's memory can be
// bounded on this system.
const MemoryLimitSupported = true
