//go:build linux

package gitserve

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// spliceRoom is the most that one move takes from git's pipe, and what it
// reserves in the cache before it.
const spliceRoom = 256 << 10

// pipeSize is the pipe buffer asked for git's stdout, so that git can run
// ahead of the moves.
const pipeSize = 1 << 20

// gather is how long the mover lets git's pipe fill after a move that
// found little in it: upload-pack writes its answer in packets of up to
// 64 KiB, often much less, and every move costs a system call, a write to
// the file and the wake-up of each client of the run. The pipe holds
// pipeSize: git does not wait meanwhile.
const gather = time.Millisecond

var (
	errSpilled    = errors.New("pack cache: spilled")
	errNotSpliced = errors.New("pack cache: not a pipe to splice from")
)

// ReadFrom takes the run's output from r. os/exec hands it the read end of
// the pipe of git's stdout: the bytes go from the pipe into the file with
// splice(2), never through this process's memory (they then meet no copy
// here on their way to the socket either: see send). The pipe stays
// non-blocking: while it is empty, the goroutine that os/exec gives it
// waits in the runtime's poller, as a network read does, rather than hold
// a thread in the system call (a thread blocked there is one the runtime
// replaces and wakes again: context switches that cost more than the
// moves). Each move reserves its bytes in the cache first, as Write does;
// a reader that is not a pipe, and the output after a spill, go through
// Write.
func (e *packEntry) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	err := errNotSpliced
	if sc, ok := r.(syscall.Conn); ok {
		src, serr := sc.SyscallConn()
		dst, derr := e.file.SyscallConn()
		if serr == nil && derr == nil {
			_ = src.Control(func(in uintptr) { _, _ = unix.FcntlInt(in, unix.F_SETPIPE_SZ, pipeSize) })
			if derr := dst.Control(func(out uintptr) {
				for {
					var n int64
					var merr error
					rerr := src.Read(func(in uintptr) bool {
						n, merr = e.move(int(in), int(out))
						return !errors.Is(merr, unix.EAGAIN) // else wait until git writes
					})
					total += n
					switch {
					case rerr != nil:
						// A pipe the poller does not watch cannot be
						// waited for: the rest goes through Write.
						err = fmt.Errorf("%w: %w", errNotSpliced, rerr)
						return
					case merr != nil:
						err = merr
						return
					}
					if n < spliceRoom/4 {
						time.Sleep(gather)
					}
				}
			}); derr != nil {
				err = derr
			}
		}
	}
	switch {
	case err == io.EOF:
		return total, nil
	case errors.Is(err, errSpilled) || errors.Is(err, errNotSpliced):
		n, err := io.Copy(writerOnly{e}, r)
		return total + n, err
	}
	return total, err
}

// move takes up to spliceRoom bytes from the pipe in into e's file, and
// tells e's readers. It returns an error that is unix.EAGAIN when the pipe
// is empty, io.EOF once the pipe's writer is gone, errSpilled when the
// bytes do not fit the cache.
func (e *packEntry) move(in, out int) (int64, error) {
	c := e.c
	c.mu.Lock()
	if !e.spilled && !c.makeRoom(spliceRoom) {
		e.spill()
	}
	if e.spilled {
		c.mu.Unlock()
		return 0, errSpilled
	}
	c.used += spliceRoom // reserved before the move, so that no two runs overshoot
	c.mu.Unlock()
	const flags = unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
	n, err := unix.Splice(in, nil, out, nil, spliceRoom, flags)
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Splice(in, nil, out, nil, spliceRoom, flags)
	}
	n = max(n, 0)
	c.mu.Lock()
	c.used -= spliceRoom - n
	if n > 0 {
		e.size += n
		e.end = e.size
		e.notify()
	}
	c.mu.Unlock()
	switch {
	case err != nil:
		return n, fmt.Errorf("pack cache: splice: %w", err)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }
