// Package prefault has the kernel back heap memory before a bulk load
// allocates it: one call for the whole range instead of one page fault per
// page. On a virtual machine a page fault can cost ten microseconds or
// more: on the ones gitfleet is developed on, a fresh process that fills
// 200 MiB page by page spends over twice as long faulting as git takes to read
// a million-entry catalog, while one call backs the same range in a
// twentieth of that time.
package prefault

// minBytes is the smallest request worth the forced collection Heap runs.
const minBytes = 16 << 20

// Heap has the kernel back about n bytes of heap that the allocations
// right after it will use, and reports whether it did. It asks the Go
// runtime for n bytes of fresh heap, backs them in one madvise call
// (MADV_POPULATE_WRITE, Linux 5.14), and hands them back to the runtime
// with a forced collection, which leaves them backed on its free pages,
// where the next allocations find them.
//
// Call it once, before a bulk of allocations that will stay, while the
// heap holds little else: a block the runtime has to zero (reused memory)
// is faulted in by the zeroing and gains nothing. Memory the load does not
// use stays backed until the runtime's scavenger returns it. It does
// nothing for n below 16 MiB, on other systems, or where the kernel does
// not support it.
func Heap(n int) bool {
	if n < minBytes {
		return false
	}
	return heap(n &^ (pageSize - 1))
}

const pageSize = 4096
