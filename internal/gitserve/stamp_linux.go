//go:build linux

package gitserve

import (
	"errors"

	"golang.org/x/sys/unix"
)

// statOf stats path without following a symbolic link; ok is false when
// the stat failed other than for a missing file.
func statOf(path string) (st fileStat, ok bool) {
	var s unix.Stat_t
	if err := unix.Lstat(path, &s); err != nil {
		return fileStat{}, errors.Is(err, unix.ENOENT)
	}
	return fileStat{dev: s.Dev, ino: s.Ino, size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), exists: true}, true
}
