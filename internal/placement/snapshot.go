package placement

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/ring"
)

// snapshotMagic starts a snapshot; its last byte is the format version.
// Version 2 writes the keys of the records front-coded (the length of the
// prefix shared with the record before, then the rest): records are in key
// order, so a million keys that all have a move under way (a first start)
// take about 9 bytes each instead of 30 (BenchmarkSnapshotFirstStart).
// Restore reads both.
const (
	snapshotMagic   = "gfplace\x02"
	snapshotMagicV1 = "gfplace\x01"
)

// Move states of a snapshot record.
const (
	recordSettled = iota // no move
	recordQueued
	// recordSent is also a sent move whose clone failed: restored, it
	// holds a slot again until its node reports it once more.
	recordSent
)

// Snapshot encodes what a restarted engine needs besides the key set: a
// digest of the key set, the members it placed with, the overrides, and the
// keys whose state the placement does not give (an owner other than the
// desired one, or a move under way). Owners that equal the placement are
// not stored: Restore recomputes them, so a settled fleet's snapshot is a
// few bytes per member and per override whatever the number of keys. It
// reads every key's state once, a few milliseconds at a million keys.
func (e *Engine) Snapshot() []byte {
	b := []byte(snapshotMagic)
	b = binary.AppendUvarint(b, uint64(len(e.keys)))
	b = binary.LittleEndian.AppendUint64(b, e.digest)
	b = binary.AppendUvarint(b, uint64(len(e.members)))
	for _, m := range e.members {
		b = binary.AppendUvarint(b, uint64(m.ID))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Weight))
	}

	overridden := make([]repokey.Key, 0, len(e.overrides))
	for k := range e.overrides {
		overridden = append(overridden, k)
	}
	slices.Sort(overridden)
	b = binary.AppendUvarint(b, uint64(len(overridden)))
	for _, k := range overridden {
		b = appendString(b, string(k))
		ex := e.overrides[k]
		b = binary.AppendUvarint(b, uint64(len(ex)))
		for _, id := range ex {
			b = binary.AppendUvarint(b, uint64(id))
		}
	}

	// The keys with a target, or whose owner is not the desired one. The
	// desired owner is the placement (0 without members) unless the key has
	// overrides: the keys that do are checked on their own, so that the
	// pass over every key reads no map.
	var records []int32
	for i := range e.keys {
		k := &e.keys[i]
		p := k.place
		if e.ring == nil {
			p = 0
		}
		if k.target != 0 || (k.owner != p && k.owner != e.want(int32(i))) {
			records = append(records, int32(i))
		}
	}
	if e.ring != nil {
		for key := range e.overrides {
			i, _ := e.index.get(e.keys, key)
			if k := &e.keys[i]; k.target == 0 && k.owner == k.place && k.owner != e.want(i) {
				records = append(records, i)
			}
		}
	}
	slices.SortFunc(records, func(x, y int32) int { return cmp.Compare(e.keys[x].key, e.keys[y].key) })
	b = binary.AppendUvarint(b, uint64(len(records)))
	prev := ""
	for _, i := range records {
		k := string(e.keys[i].key)
		shared := commonPrefix(prev, k)
		b = binary.AppendUvarint(b, uint64(shared))
		b = appendString(b, k[shared:])
		prev = k
		b = binary.AppendUvarint(b, uint64(e.keys[i].owner))
		b = binary.AppendUvarint(b, uint64(e.keys[i].target))
		state := byte(recordSettled)
		switch {
		case e.keys[i].flags&flagSent != 0:
			state = recordSent
		case e.keys[i].flags&flagQueued != 0:
			state = recordQueued
		}
		b = append(b, state)
	}
	return b
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Restore rebuilds an engine from a Snapshot and the key set the engine had
// when the snapshot was taken (persist the two together; apply later
// catalog changes with AddKeys and RemoveKeys). Every key gets back its
// owner and target, and clones in flight count against their nodes' slots;
// SetMembers with the same members then moves nothing. Restore refuses a
// damaged snapshot, and one taken with another key set: the owners it
// would restore could not be trusted (start from New, and let the nodes'
// inventories (Hold) tell who holds what).
func Restore(cfg Config, data []byte, keys []repokey.Key) (*Engine, error) {
	return RestoreNetworks(cfg, data, keys, nil)
}

// RestoreNetworks is Restore for an engine whose keys were in fork
// networks (SetNetworks) when the snapshot was taken: networks must be
// what they were then (persist them with the snapshot), since the owners
// that equal the placement are not in the snapshot.
func RestoreNetworks(cfg Config, data []byte, keys []repokey.Key, networks map[repokey.Key]string) (*Engine, error) {
	e := New(cfg)
	for k, n := range networks {
		if k != "" && n != "" {
			e.netOf[k] = n
		}
	}
	e.addKeys(len(keys), slices.Values(keys))
	r := &reader{b: data}
	magic := string(r.bytes(len(snapshotMagic)))
	if magic != snapshotMagic && magic != snapshotMagicV1 {
		return nil, errors.New("placement: not a placement snapshot of version 1 or 2")
	}
	frontCoded := magic == snapshotMagic
	n, digest := r.uvarint(), binary.LittleEndian.Uint64(r.bytes(8))
	if r.err != nil {
		return nil, r.err
	}
	if n != uint64(len(e.keys)) || digest != e.digest {
		return nil, fmt.Errorf("placement: the snapshot was taken with another key set (%d keys, given %d distinct)", n, len(e.keys))
	}

	ms := make([]ring.Member, r.count())
	for j := range ms {
		ms[j] = ring.Member{ID: r.id(), Weight: math.Float64frombits(binary.LittleEndian.Uint64(r.bytes(8)))}
		if r.err == nil && !(ms[j].Weight > 0 && ms[j].Weight <= math.MaxFloat64) {
			return nil, fmt.Errorf("placement: snapshot member %d has weight %g", ms[j].ID, ms[j].Weight)
		}
		if r.err == nil && j > 0 && ms[j].ID <= ms[j-1].ID {
			return nil, fmt.Errorf("placement: snapshot members out of order at %d", ms[j].ID)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	e.setRing(ms)
	if e.ring != nil {
		e.placeAll()
	}

	for range r.count() {
		k := r.str()
		ex := make([]uint32, r.count())
		for j := range ex {
			ex[j] = r.id()
		}
		if r.err != nil {
			return nil, r.err
		}
		// A key the snapshot names is one of the keys given, or the
		// snapshot is refused: the override is kept under the given Key.
		i, ok := e.index.lookup(e.keys, k)
		if !ok {
			return nil, fmt.Errorf("placement: snapshot override of unknown key %q", k)
		}
		if len(ex) == 0 {
			return nil, fmt.Errorf("placement: snapshot override of %q avoids no node", k)
		}
		slices.Sort(ex)
		e.overrides[e.keys[i].key] = slices.Compact(ex)
	}
	for i := range e.keys {
		e.setOwner(int32(i), e.want(int32(i)))
	}

	prev := ""
	for range r.count() {
		var k string
		if frontCoded {
			k = r.frontCoded(prev)
			prev = k
		} else {
			k = r.str()
		}
		owner, target, state := r.u32(), r.u32(), r.byte()
		if r.err != nil {
			return nil, r.err
		}
		if (target == 0) != (state == recordSettled) || state > recordSent {
			return nil, fmt.Errorf("placement: snapshot record of %q: target %d with move state %d", k, target, state)
		}
		i, ok := e.index.lookup(e.keys, k)
		if !ok {
			return nil, fmt.Errorf("placement: snapshot record of unknown key %q", k)
		}
		e.setOwner(i, owner)
		if target == 0 {
			continue
		}
		e.keys[i].target = target
		e.moving++
		ns := e.node(target)
		if state == recordSent {
			e.keys[i].flags = flagSent
			ns.inFlight++
		} else {
			e.keys[i].flags = flagQueued
			ns.queued++
			e.enqueue(i)
		}
	}
	if len(r.b) > 0 {
		return nil, fmt.Errorf("placement: %d bytes after the snapshot", len(r.b))
	}
	return e, nil
}

// reader decodes a snapshot; after the first error it returns zero values.
type reader struct {
	b   []byte
	err error
}

var errTruncated = errors.New("placement: snapshot truncated")

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) bytes(n int) []byte {
	if n > len(r.b) {
		r.fail(errTruncated)
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) byte() byte { return r.bytes(1)[0] }

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errTruncated)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) u32() uint32 {
	v := r.uvarint()
	if v > math.MaxUint32 {
		r.fail(fmt.Errorf("placement: snapshot node ID %d out of range", v))
		return 0
	}
	return uint32(v)
}

// id is a node ID, never 0.
func (r *reader) id() uint32 {
	v := r.u32()
	if v == 0 && r.err == nil {
		r.fail(errors.New("placement: snapshot has node ID 0"))
	}
	return v
}

// count is a number of items that follow, each at least one byte long.
func (r *reader) count() int {
	v := r.uvarint()
	if v > uint64(len(r.b)) {
		r.fail(errTruncated)
		return 0
	}
	return int(v)
}

func (r *reader) str() string {
	n := r.count()
	return string(r.bytes(n))
}

// frontCoded reads a key written as the length of its prefix shared with
// prev, then the rest.
func (r *reader) frontCoded(prev string) string {
	shared := r.uvarint()
	if shared > uint64(len(prev)) {
		r.fail(errors.New("placement: snapshot record shares more than the key before it has"))
		return ""
	}
	rest := r.bytes(r.count())
	return prev[:shared] + string(rest)
}
