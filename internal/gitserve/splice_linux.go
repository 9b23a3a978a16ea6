//go:build linux

package gitserve

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeSize is the pipe buffer asked for git's stdout: fewer, larger moves.
const pipeSize = 1 << 20

// ReadFrom takes the run's output from r. os/exec hands it the read end of
// the pipe of git's stdout: the bytes go from the pipe into the file with
// splice(2), never through this process's memory (they then meet no copy
// here on their way to the socket either: see send). Each move reserves
// its bytes in the cache first, as Write does; a reader that is not a
// pipe, and the output after a spill, go through Write.
func (e *packEntry) ReadFrom(r io.Reader) (int64, error) {
	sc, ok := r.(syscall.Conn)
	if !ok {
		return io.Copy(writerOnly{e}, r)
	}
	src, err := sc.SyscallConn()
	if err != nil {
		return io.Copy(writerOnly{e}, r)
	}
	dst, err := e.file.SyscallConn()
	if err != nil {
		return io.Copy(writerOnly{e}, r)
	}
	_ = src.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
	var total int64
	for {
		n, err := e.splice(src, dst)
		total += n
		switch {
		case errors.Is(err, errSpilled):
			n, err := io.Copy(writerOnly{e}, r)
			return total + n, err
		case err == io.EOF:
			return total, nil
		case err != nil:
			return total, err
		}
	}
}

var errSpilled = errors.New("pack cache: spilled")

// splice moves what the pipe src holds into e's file and tells e's readers.
// It returns io.EOF once the pipe's writer is gone, errSpilled when the
// bytes do not fit the cache (nothing moved).
func (e *packEntry) splice(src, dst syscall.RawConn) (int64, error) {
	c := e.c
	var moved int64
	var serr error
	err := src.Read(func(in uintptr) bool {
		want, err := unix.IoctlGetInt(int(in), unix.TIOCINQ) // FIONREAD: the bytes in the pipe
		if err != nil || want <= 0 {
			// An empty pipe: a small move tells bytes (moved), its end (0)
			// or nothing yet (EAGAIN: wait).
			want = 4096
		}
		c.mu.Lock()
		if !e.spilled && !c.makeRoom(int64(want)) {
			e.spill()
		}
		if e.spilled {
			c.mu.Unlock()
			serr = errSpilled
			return true
		}
		c.used += int64(want) // reserved before the move, so that no two runs overshoot
		c.mu.Unlock()
		var n int64
		werr := dst.Write(func(out uintptr) bool {
			n, serr = unix.Splice(int(in), nil, int(out), nil, want, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			return true
		})
		if serr == nil {
			serr = werr
		}
		moved = max(n, 0)
		c.mu.Lock()
		c.used -= int64(want) - moved
		if moved > 0 {
			e.size += moved
			e.end = e.size
			e.notify()
		}
		c.mu.Unlock()
		return !errors.Is(serr, syscall.EAGAIN) // else: wait for the pipe
	})
	switch {
	case serr == errSpilled:
		return 0, serr
	case serr != nil:
		return moved, fmt.Errorf("pack cache: splice: %w", serr)
	case err != nil:
		return moved, fmt.Errorf("pack cache: splice: %w", err)
	case moved == 0:
		return 0, io.EOF
	}
	return moved, nil
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }
