package prefault

import (
	"runtime"

	"golang.org/x/sys/unix"
)

func heap(n int) bool {
	ok := populate(n)
	runtime.GC() // frees the block: its pages go back to the heap, still backed
	return ok
}

// populate allocates n bytes of heap and has the kernel back them. A large
// object starts on a page of its own, as madvise needs.
func populate(n int) bool {
	b := make([]byte, n)
	return unix.Madvise(b, unix.MADV_POPULATE_WRITE) == nil
}
