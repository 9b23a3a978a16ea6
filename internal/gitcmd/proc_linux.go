//go:build linux

package gitcmd

import (
	"os/exec"

	"github.com/gitfleet/gitfleet/internal/gitcmd/spawn"
)

// upstreamFacing are the subcommands whose helpers (git-remote-https) wait
// on the network: they run under spawn's supervisor, which kills the whole
// group when gitfleet dies. The others' helpers (pack-objects, index-pack)
// end when their pipes to git close.
var upstreamFacing = map[string]bool{"fetch": true, "ls-remote": true, "clone": true}

// start starts cmd, git for the subcommand sub, in its own process group
// that dies with gitfleet, under limit bytes of data segment (0: none), in
// force before git's first instruction (a limit set on the process after
// its start raced with git's first allocations). The limit is RLIMIT_DATA
// (the heap and private writable mappings), not RLIMIT_AS: git maps pack
// files read-only, and those maps count against the address space but not
// the data segment, so a limit on the address space would break any
// repository with a pack larger than it, while this one bounds only what
// git allocates.
func start(cmd *exec.Cmd, sub string, limit int64) error {
	return spawn.Start(cmd, limit, upstreamFacing[sub])
}

// MemoryLimitSupported reports whether a git process's memory can be
// bounded on this system.
const MemoryLimitSupported = true
