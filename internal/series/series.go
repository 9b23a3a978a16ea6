// Package series keeps a full node's figures over time, for its console:
// a bucket a minute for the last day and a bucket an hour for the last
// week, each with the checks, fetches and failures seen, the bytes of git
// served, and the last sample of the disk used and of the share of
// repositories current.
//
// It is pure: no I/O, no goroutines, no clock. The caller passes the time
// of each count and sample, and persists the buckets that changed
// (Changed) in its own store, giving them back after a restart (Restore),
// so that a chart is whole at once after a restart. It decides nothing:
// what counts as a check or a failure the full node says. A Series is safe
// for concurrent use.
package series

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Counts are what happened within a bucket.
type Counts struct {
	Checks, Fetches, Failures uint64
	ServedBytes               uint64
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Checks += o.Checks
	c.Fetches += o.Fetches
	c.Failures += o.Failures
	c.ServedBytes += o.ServedBytes
}

// Gauges are a sample of how things stand.
type Gauges struct {
	DiskUsed uint64
	// Current repositories of Total (no share while Total is 0).
	Current, Total uint64
}

// Bucket is one minute's or one hour's figures.
type Bucket struct {
	Start time.Time // UTC
	Counts
	Gauges
	// Sampled says that Gauges hold a sample: the last taken within the
	// bucket.
	Sampled bool
}

// Range is a span that a Series keeps.
type Range int

const (
	// Day is the last 24 hours, a bucket a minute.
	Day Range = iota
	// Week is the last 7 days, a bucket an hour.
	Week
)

// Step is the length of one of r's buckets.
func (r Range) Step() time.Duration { return spans[r].step }

// Len is how many buckets r holds.
func (r Range) Len() int { return spans[r].n }

var spans = [...]struct {
	step   time.Duration
	n      int
	prefix string // of its buckets' keys in the store
}{
	Day:  {time.Minute, 24 * 60, "m"},
	Week: {time.Hour, 7 * 24, "h"},
}

// Series is the figures of a day and of a week.
type Series struct {
	mu    sync.Mutex
	rings [len(spans)]ring
}

// ring is one range's buckets: the bucket that starts at t is in slot
// (t / step) mod n, and is reset when a later bucket takes the slot.
type ring struct {
	step  time.Duration
	slots []Bucket
	dirty []bool
}

// New returns an empty series.
func New() *Series {
	s := &Series{}
	for r, sp := range spans {
		s.rings[r] = ring{step: sp.step, slots: make([]Bucket, sp.n), dirty: make([]bool, sp.n)}
	}
	return s
}

func (g *ring) index(start time.Time) int {
	return int(start.Unix() / int64(g.step/time.Second) % int64(len(g.slots)))
}

// bucket is the bucket of at, made empty if its slot held an older one;
// nil when the slot holds a newer one (at is older than the ring).
func (g *ring) bucket(at time.Time) *Bucket {
	start := at.UTC().Truncate(g.step)
	i := g.index(start)
	b := &g.slots[i]
	switch {
	case b.Start.Equal(start):
	case b.Start.After(start):
		return nil
	default:
		*b = Bucket{Start: start}
	}
	g.dirty[i] = true
	return b
}

// Count adds c to the buckets of at.
func (s *Series) Count(at time.Time, c Counts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rings {
		if b := s.rings[i].bucket(at); b != nil {
			b.Counts.Add(c)
		}
	}
}

// Sample records g as the latest sample of the buckets of at.
func (s *Series) Sample(at time.Time, g Gauges) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rings {
		if b := s.rings[i].bucket(at); b != nil {
			b.Gauges, b.Sampled = g, true
		}
	}
}

// Window returns r's figures up to the bucket of now, oldest first, as
// at most n points (n <= 0: one a bucket, r.Len() of them): a point starts
// where its first bucket does, sums what its buckets counted and keeps the
// last sample among them. Buckets of which nothing is known count nothing.
func (s *Series) Window(r Range, now time.Time, n int) []Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &s.rings[r]
	size := len(g.slots)
	per := 1
	if n > 0 && n < size {
		per = (size + n - 1) / n
	}
	last := now.UTC().Truncate(g.step)
	first := last.Add(-time.Duration(size-1) * g.step)
	out := make([]Bucket, 0, (size+per-1)/per)
	for i := 0; i < size; i++ {
		start := first.Add(time.Duration(i) * g.step)
		if i%per == 0 {
			out = append(out, Bucket{Start: start})
		}
		p := &out[len(out)-1]
		if b := &g.slots[g.index(start)]; b.Start.Equal(start) {
			p.Counts.Add(b.Counts)
			if b.Sampled {
				p.Gauges, p.Sampled = b.Gauges, true
			}
		}
	}
	return out
}

// Stored is one bucket as it is kept in a store: its key (a few bytes,
// one a slot, so that the stored buckets of a range stay as many as it
// holds) and its value.
type Stored struct {
	Key   string
	Value []byte
}

// Changed returns the buckets that changed since the last call, to be
// stored.
func (s *Series) Changed() []Stored {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Stored
	for r := range s.rings {
		g := &s.rings[r]
		for i, d := range g.dirty {
			if d {
				out = append(out, Stored{Key: spans[r].prefix + strconv.Itoa(i), Value: encode(g.slots[i])})
				g.dirty[i] = false
			}
		}
	}
	return out
}

// Restore takes back a bucket that Changed handed out (before a restart).
// A bucket older than what its slot holds is dropped.
func (s *Series) Restore(key string, value []byte) error {
	r := -1
	for i, sp := range spans {
		if len(key) > len(sp.prefix) && key[:len(sp.prefix)] == sp.prefix {
			r = i
		}
	}
	if r < 0 {
		return fmt.Errorf("series: bucket key %q: not one of this version's", key)
	}
	b, err := decode(value)
	if err != nil {
		return fmt.Errorf("series: bucket %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &s.rings[r]
	if b.Start.IsZero() || !b.Start.Equal(b.Start.Truncate(g.step)) {
		return fmt.Errorf("series: bucket %s: starts at %s, not on a bucket's bound", key, b.Start)
	}
	if slot := &g.slots[g.index(b.Start)]; !slot.Start.After(b.Start) {
		*slot = b
	}
	return nil
}

// version is the first byte of a stored bucket.
const version = 1

// encode writes b as its version, then its start (unix seconds) and its
// figures as varints.
func encode(b Bucket) []byte {
	buf := make([]byte, 0, 32)
	buf = append(buf, version)
	sampled := uint64(0)
	if b.Sampled {
		sampled = 1
	}
	for _, v := range []uint64{uint64(b.Start.Unix()), b.Checks, b.Fetches, b.Failures, b.ServedBytes, b.DiskUsed,
		b.Current, b.Total, sampled} {
		buf = binary.AppendUvarint(buf, v)
	}
	return buf
}

var errShort = errors.New("truncated")

func decode(v []byte) (Bucket, error) {
	if len(v) == 0 || v[0] != version {
		return Bucket{}, errors.New("not a bucket of this version")
	}
	v = v[1:]
	var f [9]uint64
	for i := range f {
		n, k := binary.Uvarint(v)
		if k <= 0 {
			return Bucket{}, errShort
		}
		f[i], v = n, v[k:]
	}
	if f[0] > 1<<40 {
		return Bucket{}, errors.New("a start out of range")
	}
	return Bucket{Start: time.Unix(int64(f[0]), 0).UTC(),
		Counts:  Counts{Checks: f[1], Fetches: f[2], Failures: f[3], ServedBytes: f[4]},
		Gauges:  Gauges{DiskUsed: f[5], Current: f[6], Total: f[7]},
		Sampled: f[8] == 1}, nil
}
