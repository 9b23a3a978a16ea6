package gitserve

import (
	"path/filepath"
	"time"
)

// racyMargin is how old a refs file's or directory's times must be, when a
// stamp is taken, for the stamp to be trusted: file times come from a
// coarse clock (a tick of the kernel's on local disks, a second or two on
// some filesystems), and a change in the same tick as the stamp could
// leave the times as they were.
const racyMargin = 3 * time.Second

// refsStamp is what a stat of a repository's refs files and directories
// tells, without reading them, taken as its refs are read (readRefs). git
// writes a loose ref to a new file that it renames into place, which
// changes the times of its directory, and replaces packed-refs, HEAD and
// the others whole (a new inode): so a stamp that is still equal says that
// the refs are as they were read, unless a change came within racyMargin
// before it was taken ("racily clean", as git says of its index), when it
// is not trusted. The file times are the filesystem's, on the wall clock.
type refsStamp struct {
	taken   time.Time
	entries []stampEntry
	trusted bool
}

type stampEntry struct {
	path string
	stat fileStat
}

// fileStat is what tells a file or directory changed: its identity, its
// size and its times (zero when it does not exist).
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns
	exists       bool
}

// add records the stat of path, taken now, before it is read.
func (s *refsStamp) add(path string) {
	st, ok := statOf(path)
	if !ok {
		s.trusted = false
		s.entries = nil
		return
	}
	if s.trusted {
		s.entries = append(s.entries, stampEntry{path: path, stat: st})
	}
}

// seal decides whether the stamp is trusted, once every entry is in.
func (s *refsStamp) seal() {
	old := s.taken.Add(-racyMargin).UnixNano()
	for _, e := range s.entries {
		if e.stat.mtime >= old || e.stat.ctime >= old {
			s.trusted = false
			s.entries = nil
			return
		}
	}
}

// unchanged reports whether the stamp is trusted and every file and
// directory it covers stats as it did.
func (s *refsStamp) unchanged() bool {
	if !s.trusted {
		return false
	}
	for _, e := range s.entries {
		if st, ok := statOf(e.path); !ok || st != e.stat {
			return false
		}
	}
	return true
}

// newStamp starts a stamp of the repository at dir, taken now.
func newStamp(dir string) refsStamp {
	s := refsStamp{taken: time.Now(), trusted: true}
	s.add(filepath.Join(dir, "refs"))
	return s
}
