//go:build unix

package mirror

import "syscall"

// flushDisks asks the kernel to write every file system's dirty data to
// disk, so that a clean-stop marker written after it vouches for what was
// written before.
func flushDisks() { syscall.Sync() }
