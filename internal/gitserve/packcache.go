package gitserve

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// CacheConfig bounds the pack cache: identical upload-pack requests share
// one run, and its output is kept on disk until unused for TTL, within
// MaxBytes in all. MaxBytes 0 turns the cache off.
type CacheConfig struct {
	MaxBytes int64
	TTL      time.Duration
	// Window is how close two identical requests that are unlikely to be
	// shared (a filtered, shallow or incremental fetch: see start) must
	// come for the answer to be kept: one kept is checked whole first,
	// which costs about two thirds of the run. Such an answer is kept
	// when a second request joined its run or the same request came
	// within Window before it; else it goes to its client alone and is
	// dropped. 0: DefaultCacheWindow; negative: every answer is kept.
	Window time.Duration
}

// DefaultCacheWindow is CacheConfig.Window's default.
const DefaultCacheWindow = 2 * time.Second

// fileOverhead is what a cache file is charged besides its bytes: its
// inode and the rest of its last block.
const fileOverhead = 4096

// PackCache shares upload-pack runs between identical requests and keeps
// their output in files under one directory. A run's output goes to a
// file as it is produced; every client of the run reads the file from its
// start and follows the live end, so one slow or departed client never
// holds the others or the run. A run that ended well stays for the TTL,
// for identical requests that come later.
//
// The files never take more than MaxBytes: before a run's file grows, the
// oldest finished entries that nobody reads are evicted; when that is not
// enough, the run spills: it stops growing its file, takes no more
// clients, is not kept, and hands the rest of its output to the clients
// it has one chunk at a time, at the pace of the slowest, as an unshared
// run would. It is safe for concurrent use.
type PackCache struct {
	dir    string
	max    int64
	ttl    time.Duration
	window time.Duration
	clk    clock.Clock

	mu       sync.Mutex
	entries  map[string]*packEntry // runs that may be joined, and kept output
	finished *list.List            // kept entries, oldest first
	used     int64                 // bytes charged for every file on disk
	seq      uint64
	stats    CacheStats
	// arrivals are when the runs of the last window started, by key, for
	// the answers that are not kept unless asked for again (see start).
	arrivals map[string]time.Time
}

// CacheStats counts what the cache did since it was made.
type CacheStats struct {
	Runs     int64 // runs started
	Shared   int64 // requests that joined a live run
	Hits     int64 // requests served from a kept file
	Unkept   int64 // runs of answers unlikely to be shared that nobody else asked for: not checked nor kept
	Spilled  int64 // runs whose output did not fit the bound
	Evicted  int64 // kept files removed for room
	Expired  int64 // kept files removed after the TTL
	Bytes    int64 // bytes charged on disk now
	Entries  int   // runs and kept files indexed now
	Watching int   // clients attached to runs and files now
}

// NewPackCache makes a cache in dir, emptying it first: whatever a previous
// process left there is not known to be whole.
func NewPackCache(dir string, cfg CacheConfig, clk clock.Clock) (*PackCache, error) {
	if cfg.MaxBytes <= 0 {
		return nil, errors.New("pack cache: no size bound")
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("pack cache: clean %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pack cache: %w", err)
	}
	window := cfg.Window
	if window == 0 {
		window = DefaultCacheWindow
	}
	return &PackCache{dir: dir, max: cfg.MaxBytes, ttl: cfg.TTL, window: window, clk: clk,
		entries: map[string]*packEntry{}, finished: list.New(), arrivals: map[string]time.Time{}}, nil
}

// Stats returns the cache's counters.
func (c *PackCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Entries = c.used, len(c.entries)
	for _, e := range c.entries {
		s.Watching += len(e.readers)
	}
	return s
}

// packEntry is one run's output: a file, and after a spill one chunk in
// memory. Every field but the immutable ones is guarded by the cache's mu.
type packEntry struct {
	c    *PackCache
	key  string
	path string
	file *os.File // the run's handle; nil once the run ended

	size    int64  // bytes in the file
	end     int64  // bytes produced: size, plus what went through chunk
	chunk   []byte // after a spill: the bytes [end-len(chunk), end)
	spilled bool
	keep    bool // kept if it ends well: likely to be shared, or another request asked for it
	done    bool
	err     error // why the run failed
	indexed bool  // in c.entries: joinable, or kept
	elem    *list.Element
	usedAt  time.Time // when the run ended or a request last found it
	readers map[*packReader]bool
	changed chan struct{} // closed and replaced at every change
	cancel  context.CancelFunc
}

// packReader is one client's place in an entry.
type packReader struct {
	e       *packEntry
	off     int64 // bytes delivered
	pending int64 // bytes handed out by the last next, delivered once next is called again
	f       *os.File
}

// part is a piece of an answer to send: n bytes of the entry's file from
// off, or, after a spill, bytes in memory.
type part struct {
	f   *os.File // nil for bytes in memory
	off int64
	n   int64
	mem []byte
}

// join attaches a reader to the live run or kept file of key, or returns
// nil when there is none.
func (c *PackCache) join(key string) *packReader {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	e := c.entries[key]
	if e == nil {
		return nil
	}
	return c.attachTo(e)
}

// attachTo counts a request that found e and attaches its reader; a kept
// entry in use goes to the back of the line, for expiry and eviction.
func (c *PackCache) attachTo(e *packEntry) *packReader {
	if e.done {
		c.stats.Hits++
		e.usedAt = c.clk.Now()
		c.finished.MoveToBack(e.elem)
	} else {
		c.stats.Shared++
		e.keep = true // a second request asked for it
	}
	return e.attach()
}

// start makes the entry of a new run of key and attaches a reader to it;
// leader is true when the caller must run it (and cancel, which the last
// reader to leave calls, stops the run), false when an identical request
// made it first (the reader then follows that one). likely says whether
// the answer is likely to be asked for again (a full clone's): one that
// is not is kept only when another request asks for it while it runs, or
// asked for it within the window before (see CacheConfig.Window).
func (c *PackCache) start(key string, likely bool, cancel context.CancelFunc) (r *packReader, leader bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		return c.attachTo(e), false, nil
	}
	keep := likely || c.window < 0
	if !keep {
		now := c.clk.Now()
		for k, at := range c.arrivals {
			if now.Sub(at) > c.window {
				delete(c.arrivals, k)
			}
		}
		_, keep = c.arrivals[key]
		c.arrivals[key] = now
	}
	c.seq++
	path := filepath.Join(c.dir, strconv.FormatUint(c.seq, 10)+".pack")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("pack cache: %w", err)
	}
	e := &packEntry{c: c, key: key, path: path, file: f, indexed: true, keep: keep, cancel: cancel,
		readers: map[*packReader]bool{}, changed: make(chan struct{})}
	c.used += fileOverhead
	if !c.makeRoom(0) {
		e.spill()
	}
	if e.indexed {
		c.entries[key] = e
	}
	c.stats.Runs++
	return e.attach(), true, nil
}

// Run removes kept entries once they are unused for the TTL, on the
// cache's clock, until ctx ends: an idle server's cache does not keep its
// files past the TTL waiting for a request (which expires them too). It
// checks every quarter of the TTL, so an entry outlives its TTL by at most
// that. Without a TTL it returns at once.
func (c *PackCache) Run(ctx context.Context) {
	if c.ttl <= 0 {
		return
	}
	t := c.clk.NewTicker(max(c.ttl/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.mu.Lock()
			c.expire()
			c.mu.Unlock()
		}
	}
}

// expire removes the kept entries unused for the TTL that nobody reads.
// Caller holds c.mu.
func (c *PackCache) expire() {
	now := c.clk.Now()
	for el := c.finished.Front(); el != nil; {
		e, next := el.Value.(*packEntry), el.Next()
		if now.Sub(e.usedAt) < c.ttl {
			return // the list is in the order of usedAt
		}
		if len(e.readers) == 0 {
			c.unindex(e)
			c.stats.Expired++
		}
		el = next
	}
}

// makeRoom evicts the oldest kept entries that nobody reads until need
// more bytes fit, and reports whether they do.
func (c *PackCache) makeRoom(need int64) bool {
	for el := c.finished.Front(); c.used+need > c.max && el != nil; {
		e, next := el.Value.(*packEntry), el.Next()
		if len(e.readers) == 0 {
			c.unindex(e)
			c.stats.Evicted++
		}
		el = next
	}
	return c.used+need <= c.max
}

// unindex takes e out of the index (no new reader finds it) and removes its
// file once nobody reads it and its run has ended.
func (c *PackCache) unindex(e *packEntry) {
	if e.indexed {
		e.indexed = false
		delete(c.entries, e.key)
		if e.elem != nil {
			c.finished.Remove(e.elem)
			e.elem = nil
		}
	}
	e.removeIfUnused()
}

func (e *packEntry) removeIfUnused() {
	if e.indexed || !e.done || len(e.readers) > 0 || e.path == "" {
		return
	}
	_ = os.Remove(e.path)
	e.path = ""
	e.c.used -= e.size + fileOverhead
}

func (e *packEntry) attach() *packReader {
	r := &packReader{e: e}
	e.readers[r] = true
	return r
}

func (e *packEntry) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// spill stops e's file from growing: e is no longer joinable nor kept.
func (e *packEntry) spill() {
	e.spilled = true
	e.c.stats.Spilled++
	if e.indexed {
		e.indexed = false
		delete(e.c.entries, e.key)
	}
}

// Write takes the run's output. Into the file while it fits; after a
// spill, it waits for every reader to have delivered the previous chunk.
func (e *packEntry) Write(p []byte) (int, error) {
	c := e.c
	c.mu.Lock()
	if !e.spilled && !c.makeRoom(int64(len(p))) {
		e.spill()
	}
	if !e.spilled {
		c.used += int64(len(p)) // reserved before the write, so that no two runs overshoot
		c.mu.Unlock()
		n, err := e.file.Write(p)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.used -= int64(len(p) - n)
		e.size += int64(n)
		e.end = e.size
		e.notify()
		if err != nil {
			return n, fmt.Errorf("pack cache: %w", err)
		}
		return n, nil
	}
	for {
		behind := false
		for r := range e.readers {
			if r.off+r.pending < e.end {
				behind = true
				break
			}
		}
		if !behind {
			break
		}
		ch := e.changed
		c.mu.Unlock()
		<-ch // a reader moved or left, or the run ended (its timeout kills git)
		c.mu.Lock()
		if len(e.readers) == 0 || e.done {
			break
		}
	}
	defer c.mu.Unlock()
	if len(e.readers) == 0 || e.done {
		return 0, errors.New("pack cache: every client of the run went away, or it ended")
	}
	e.chunk = append(e.chunk[:0:0], p...)
	e.end += int64(len(p))
	e.notify()
	return len(p), nil
}

// keepable returns the path of e's file when finish would keep it: the
// run is whole on file (it did not spill), answers are kept, and this one
// is to be (keep). Once it says no, the entry takes no more readers.
func (e *packEntry) keepable() (string, bool) {
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := e.indexed && !e.spilled && c.ttl > 0 && e.keep
	if !ok && e.indexed && !e.keep {
		c.stats.Unkept++
		e.indexed = false // nobody joins an answer that is not checked
		delete(c.entries, e.key)
	}
	return e.path, ok
}

// finish ends e's run: err is nil when it succeeded, keep is false when its
// output must not serve later requests (the repository changed under it).
func (e *packEntry) finish(err error, keep bool) {
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = e.file.Close()
	e.file = nil
	e.done, e.err = true, err
	switch {
	case err == nil && keep && e.keep && e.indexed && c.ttl > 0:
		e.usedAt = c.clk.Now()
		e.elem = c.finished.PushBack(e)
	default:
		c.unindex(e)
	}
	e.notify()
}

// settle waits until the run ended, or made atLeast bytes, or for at most
// wait, before the reader's first part is asked for. whole says that the
// answer is all on file, of size bytes: the run ended well and did not
// spill. A run that ended in failure answers its error, ctx's if the
// client went away.
func (r *packReader) settle(ctx context.Context, atLeast int64, wait time.Duration) (size int64, whole bool, err error) {
	e := r.e
	c := e.c
	timer := time.NewTimer(wait) // paces the wire, as write deadlines do: not the Handler's clock
	defer timer.Stop()
	c.mu.Lock()
	for !e.done && !e.spilled && e.end-r.off < atLeast {
		ch := e.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return 0, false, nil
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if e.done && e.err != nil {
		return 0, false, e.err
	}
	return e.size, e.done && !e.spilled, nil
}

// next waits for the reader's next part: io.EOF after the last, the run's
// error if it failed, ctx's if the client went away. A part of the file is
// all that the run wrote of it past the reader's place; the part is valid
// until the following call.
func (r *packReader) next(ctx context.Context) (part, error) {
	e := r.e
	c := e.c
	c.mu.Lock()
	if r.pending > 0 {
		r.off += r.pending
		r.pending = 0
		if e.spilled {
			e.notify() // the run may wait for this reader
		}
	}
	for r.off >= e.end && !e.done {
		ch := e.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return part{}, ctx.Err()
		}
		c.mu.Lock()
	}
	switch off := r.off; {
	case off < e.size:
		n := e.size - off
		r.pending = n
		path := e.path
		c.mu.Unlock()
		if r.f == nil {
			f, err := os.Open(path)
			if err != nil {
				return part{}, fmt.Errorf("pack cache: %w", err)
			}
			r.f = f
		}
		return part{f: r.f, off: off, n: n}, nil
	case off < e.end:
		p := e.chunk[off-(e.end-int64(len(e.chunk))):]
		r.pending = int64(len(p))
		c.mu.Unlock()
		return part{mem: p}, nil
	}
	err := e.err
	c.mu.Unlock()
	if err == nil {
		err = io.EOF
	}
	return part{}, err
}

// close detaches the reader. The last reader of a live run cancels it:
// nobody would read what it makes, and it is not kept unfinished.
func (r *packReader) close() {
	e := r.e
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.f != nil {
		_ = r.f.Close()
	}
	delete(e.readers, r)
	if len(e.readers) == 0 && !e.done {
		if e.indexed {
			e.indexed = false
			delete(c.entries, e.key)
		}
		if e.cancel != nil {
			e.cancel()
		}
	}
	e.removeIfUnused()
	e.notify()
}
