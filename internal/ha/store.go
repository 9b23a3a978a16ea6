package ha

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/store"
)

// ErrFenced is the error of a write made by a leader whose term is over:
// another coordinator may lead, and the write was not applied.
var ErrFenced = errors.New("ha: this coordinator no longer leads (its etcd lease is gone); the write was refused")

// etcd refuses a transaction of more than 128 operations or a request of
// more than 1.5 MiB (its defaults). A batch within both limits is one
// transaction; a larger one goes through a journal (see Batch). A value
// larger than partSize is kept as parts.
const (
	txnMaxOps   = 100
	txnMaxBytes = 1 << 20
	partSize    = 256 << 10
	scanPage    = 5000
)

// Value tags: the first byte of a stored data value.
const (
	tagInline = 0 // the value follows
	tagParts  = 1 // a manifest: generation, part count, length
)

// Store is a store.Store in etcd, under a prefix. Every write is a
// transaction that holds only while the term's fence holds (the leader's
// election key is still the one it created), so a deposed leader's writes
// fail with ErrFenced instead of overwriting its successor's state.
//
// Layout under the prefix:
//
//	data/BUCKET/KEY            a value (tagInline) or a manifest (tagParts)
//	part/BUCKET\x00KEY\x00GEN/NNNNNNNN   the parts of a large value
//	journal/NNNNNNNN           the records of a large batch being applied
//	journal-commit             present once a large batch is committed
//
// A Store is safe for concurrent use; it belongs to one term.
type Store struct {
	client *clientv3.Client
	prefix string
	fence  clientv3.Cmp

	mu sync.Mutex // serialises writes: a journal is one at a time
	// gens is the generation of the parts of each chunked value, by data
	// key: the only writer is this term, so it stays exact.
	gens map[string]string
	// pending is set while a committed journal is not fully applied (its
	// apply failed): no other write may go before it.
	pending bool
	// scanPage is how many keys a Scan asks an etcd without RangeStream
	// for at a time.
	scanPage int64
}

var _ store.Store = (*Store)(nil)

// NewStore returns the store under prefix whose writes hold while fence
// does. Call Recover before using it.
func NewStore(client *clientv3.Client, prefix string, fence clientv3.Cmp) *Store {
	return &Store{client: client, prefix: prefix + "/", fence: fence, gens: map[string]string{}, scanPage: scanPage}
}

func (s *Store) dataPrefix(bucket string) string { return s.prefix + "data/" + bucket + "/" }
func (s *Store) dataKey(bucket, key string) string {
	return s.dataPrefix(bucket) + key
}
func (s *Store) partPrefix(dataKey, gen string) string {
	rel := strings.TrimPrefix(dataKey, s.prefix+"data/")
	bucket, key, _ := strings.Cut(rel, "/")
	return s.prefix + "part/" + bucket + "\x00" + key + "\x00" + gen + "/"
}
func (s *Store) journalPrefix() string { return s.prefix + "journal/" }
func (s *Store) commitKey() string     { return s.prefix + "journal-commit" }

func checkName(bucket, key string) error {
	if bucket == "" || strings.ContainsAny(bucket, "/\x00") {
		return fmt.Errorf("ha: bucket name %q: must be non-empty, without / or NUL", bucket)
	}
	if strings.ContainsRune(key, 0) {
		return fmt.Errorf("ha: key %q in %s: contains NUL", key, bucket)
	}
	return nil
}

// rawOp is one etcd write: a put, a delete of a key, or a delete of every
// key under a prefix.
type rawOp struct {
	Key      string
	Value    []byte
	Delete   bool
	IsPrefix bool
}

func (o rawOp) size() int { return len(o.Key) + len(o.Value) + 16 }

func (o rawOp) etcd() clientv3.Op {
	switch {
	case o.Delete && o.IsPrefix:
		return clientv3.OpDelete(o.Key, clientv3.WithPrefix())
	case o.Delete:
		return clientv3.OpDelete(o.Key)
	default:
		return clientv3.OpPut(o.Key, string(o.Value))
	}
}

// Get returns a copy of the value of key in bucket.
func (s *Store) Get(ctx context.Context, bucket, key string) ([]byte, bool, error) {
	if err := checkName(bucket, key); err != nil {
		return nil, false, err
	}
	dk := s.dataKey(bucket, key)
	resp, err := s.client.Get(ctx, dk)
	if err != nil {
		return nil, false, fmt.Errorf("ha: get %s/%s: %w", bucket, key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	v, err := s.decode(ctx, dk, resp.Kvs[0].Value, resp.Header.Revision)
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// decode turns a stored data value into the value, reading the parts of a
// chunked one at rev (the revision its manifest was read at).
func (s *Store) decode(ctx context.Context, dk string, raw []byte, rev int64) ([]byte, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("ha: %s: empty record", dk)
	}
	switch raw[0] {
	case tagInline:
		return bytes.Clone(raw[1:]), nil
	case tagParts:
		gen, n, size, err := parseManifest(raw)
		if err != nil {
			return nil, fmt.Errorf("ha: %s: %w", dk, err)
		}
		resp, err := s.client.Get(ctx, s.partPrefix(dk, gen), clientv3.WithPrefix(), clientv3.WithRev(rev),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return nil, fmt.Errorf("ha: parts of %s: %w", dk, err)
		}
		if len(resp.Kvs) != n {
			return nil, fmt.Errorf("ha: %s: %d parts stored, the manifest names %d", dk, len(resp.Kvs), n)
		}
		v := make([]byte, 0, size)
		for _, kv := range resp.Kvs {
			v = append(v, kv.Value...)
		}
		if len(v) != size {
			return nil, fmt.Errorf("ha: %s: %d bytes in its parts, the manifest says %d", dk, len(v), size)
		}
		return v, nil
	default:
		return nil, fmt.Errorf("ha: %s: unknown record tag %d", dk, raw[0])
	}
}

func manifest(gen string, n, size int) []byte {
	b := []byte{tagParts}
	b = binary.AppendUvarint(b, uint64(len(gen)))
	b = append(b, gen...)
	b = binary.AppendUvarint(b, uint64(n))
	return binary.AppendUvarint(b, uint64(size))
}

func parseManifest(raw []byte) (gen string, n, size int, err error) {
	b := raw[1:]
	l, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < l {
		return "", 0, 0, errors.New("bad manifest")
	}
	gen, b = string(b[k:k+int(l)]), b[k+int(l):]
	nn, k := binary.Uvarint(b)
	if k <= 0 {
		return "", 0, 0, errors.New("bad manifest")
	}
	b = b[k:]
	sz, k := binary.Uvarint(b)
	if k <= 0 || nn > 1<<24 || sz > 1<<40 {
		return "", 0, 0, errors.New("bad manifest")
	}
	return gen, int(nn), int(sz), nil
}

// Put sets key in bucket to value.
func (s *Store) Put(ctx context.Context, bucket, key string, value []byte) error {
	return s.Batch(ctx, []store.Op{{Bucket: bucket, Key: key, Value: value}})
}

// Delete removes key from bucket.
func (s *Store) Delete(ctx context.Context, bucket, key string) error {
	return s.Batch(ctx, []store.Op{{Bucket: bucket, Key: key, Delete: true}})
}

// Scan calls fn for each key of bucket that starts with prefix, in key
// order, as of one revision. It streams the range (etcd's RangeStream,
// 3.7): a Get with a limit makes etcd count every key left in the range,
// so reading a million keys a page at a time costs time in the square of
// their number (a new leader restoring a million repositories would wait
// minutes). With an older etcd, it reads pages of scanPage keys.
func (s *Store) Scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error {
	if err := checkName(bucket, prefix); err != nil {
		return err
	}
	base := s.dataPrefix(bucket)
	from, end := base+prefix, clientv3.GetPrefixRangeEnd(base+prefix)
	// The revision is pinned so that the parts of a large value are read
	// as of the revision of its manifest.
	rev, err := s.revision(ctx)
	if err != nil {
		return fmt.Errorf("ha: scan %s/%s: %w", bucket, prefix, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := s.client.GetStream(sctx, from, clientv3.WithRange(end), clientv3.WithRev(rev))
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			return s.scanPages(ctx, base, from, end, fn)
		}
		return fmt.Errorf("ha: scan %s/%s: %w", bucket, prefix, err)
	}
	defer func() {
		cancel()
		for range stream { // the client's reader ends once the stream is cancelled
		}
	}()
	first := true
	for resp := range stream {
		if err := resp.Err(); err != nil {
			if first && status.Code(err) == codes.Unimplemented {
				return s.scanPages(ctx, base, from, end, fn)
			}
			return fmt.Errorf("ha: scan %s/%s: %w", bucket, prefix, err)
		}
		first = false
		if stop, err := s.each(ctx, base, resp.Kvs, rev, fn); stop || err != nil {
			return err
		}
	}
	return nil
}

// revision is etcd's current revision.
func (s *Store) revision(ctx context.Context) (int64, error) {
	resp, err := s.client.Get(ctx, s.prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// scanPages is Scan for an etcd without RangeStream: pages of scanPage
// keys, each read at the latest revision.
func (s *Store) scanPages(ctx context.Context, base, from, end string, fn func(key string, value []byte) error) error {
	for {
		resp, err := s.client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(s.scanPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return fmt.Errorf("ha: scan %s: %w", strings.TrimPrefix(from, s.prefix), err)
		}
		if stop, err := s.each(ctx, base, resp.Kvs, resp.Header.Revision, fn); stop || err != nil {
			return err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// each calls fn for the records kvs, read at rev, and reports whether to
// stop: fn said so (store.ErrStop, not an error) or failed.
func (s *Store) each(ctx context.Context, base string, kvs []*mvccpb.KeyValue, rev int64, fn func(key string, value []byte) error) (bool, error) {
	for _, kv := range kvs {
		v, err := s.decode(ctx, string(kv.Key), kv.Value, rev)
		if err != nil {
			return true, err
		}
		if err := fn(strings.TrimPrefix(string(kv.Key), base), v); err != nil {
			if errors.Is(err, store.ErrStop) {
				return true, nil
			}
			return true, err
		}
	}
	return false, nil
}

// Close does nothing: the etcd client belongs to the caller.
func (s *Store) Close() error { return nil }

// Batch applies ops atomically. A batch that fits in one etcd transaction
// is one; a larger one is written first as a journal, committed by one
// transaction, then applied record by record: if this leader dies after
// the commit, the next one finishes the batch (Recover), and if before,
// it discards the journal. Reads between the commit and the end of the
// apply may see part of the batch; only the leader writes and it reads
// its state only when it starts, after Recover.
func (s *Store) Batch(ctx context.Context, ops []store.Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending {
		if err := s.replay(ctx); err != nil {
			return fmt.Errorf("ha: finish the previous batch: %w", err)
		}
		s.pending = false
	}
	raw, gens, err := s.plan(ops)
	if err != nil {
		return err
	}
	if len(raw) == 0 {
		return nil
	}
	records := split(raw)
	if len(records) == 1 {
		err = s.txn(ctx, raw...)
	} else {
		err = s.journaled(ctx, records)
	}
	if err == nil || s.pending {
		// Applied, or committed and to be finished: the parts are those
		// of the batch.
		for dk, g := range gens {
			if g == "" {
				delete(s.gens, dk)
			} else {
				s.gens[dk] = g
			}
		}
	}
	if err != nil {
		return fmt.Errorf("ha: batch of %d writes: %w", len(ops), err)
	}
	return nil
}

// plan turns ops into etcd writes on distinct keys (the last op on a key
// wins, as applying them in order would), and returns the generation each
// chunked key will have ("" for none).
func (s *Store) plan(ops []store.Op) ([]rawOp, map[string]string, error) {
	last := make(map[string]int, len(ops))
	for i, op := range ops {
		if err := checkName(op.Bucket, op.Key); err != nil {
			return nil, nil, err
		}
		last[s.dataKey(op.Bucket, op.Key)] = i
	}
	var raw []rawOp
	gens := map[string]string{}
	for i, op := range ops {
		dk := s.dataKey(op.Bucket, op.Key)
		if last[dk] != i {
			continue
		}
		if old, ok := s.gens[dk]; ok {
			raw = append(raw, rawOp{Key: s.partPrefix(dk, old), Delete: true, IsPrefix: true})
			gens[dk] = ""
		}
		switch {
		case op.Delete:
			raw = append(raw, rawOp{Key: dk, Delete: true})
		case len(op.Value) < partSize:
			raw = append(raw, rawOp{Key: dk, Value: append([]byte{tagInline}, op.Value...)})
		default:
			gen := rand.Text() // no "/" or NUL, which the part keys use as separators
			n := 0
			for off := 0; off < len(op.Value); off += partSize {
				part := op.Value[off:min(off+partSize, len(op.Value))]
				raw = append(raw, rawOp{Key: fmt.Sprintf("%s%08d", s.partPrefix(dk, gen), n), Value: part})
				n++
			}
			raw = append(raw, rawOp{Key: dk, Value: manifest(gen, n, len(op.Value))})
			gens[dk] = gen
		}
	}
	return raw, gens, nil
}

// split cuts raw into records that each fit in one transaction.
func split(raw []rawOp) [][]rawOp {
	var records [][]rawOp
	var cur []rawOp
	size := 0
	for _, op := range raw {
		if len(cur) > 0 && (len(cur) == txnMaxOps || size+op.size() > txnMaxBytes) {
			records = append(records, cur)
			cur, size = nil, 0
		}
		cur = append(cur, op)
		size += op.size()
	}
	if len(cur) > 0 {
		records = append(records, cur)
	}
	return records
}

// txn applies ops in one transaction, if the fence holds.
func (s *Store) txn(ctx context.Context, ops ...rawOp) error {
	eops := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		eops[i] = op.etcd()
	}
	resp, err := s.client.Txn(ctx).If(s.fence).Then(eops...).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrFenced
	}
	return nil
}

// journaled writes records as a journal, commits it, and applies it.
func (s *Store) journaled(ctx context.Context, records [][]rawOp) error {
	// Once the commit is sent the batch may have happened, even if the
	// answer was lost: from then on it is finished (by this leader, before
	// its next write, or by the next) or found never committed.
	if err := s.writeJournal(ctx, records); err != nil {
		s.pending = true
		return err
	}
	// The records are at hand: applied from memory, not read back.
	if err := s.apply(ctx, len(records), func(i int) ([]rawOp, error) { return records[i], nil }); err != nil {
		s.pending = true
		return err
	}
	return nil
}

// writeJournal writes records as a journal and commits it.
func (s *Store) writeJournal(ctx context.Context, records [][]rawOp) error {
	// What a failed batch of this term left behind is not committed.
	if err := s.txn(ctx, rawOp{Key: s.journalPrefix(), Delete: true, IsPrefix: true}); err != nil {
		return err
	}
	for i, rec := range records {
		b := encodeRecord(rec)
		// Each journal entry holds up to txnMaxBytes of writes, so it goes
		// alone in its transaction.
		if err := s.txn(ctx, rawOp{Key: fmt.Sprintf("%s%08d", s.journalPrefix(), i), Value: b}); err != nil {
			return fmt.Errorf("write the journal: %w", err)
		}
	}
	if err := s.txn(ctx, rawOp{Key: s.commitKey(), Value: []byte(fmt.Sprint(len(records)))}); err != nil {
		return fmt.Errorf("commit the journal: %w", err)
	}
	return nil
}

// replay applies the committed journal, then removes it. Each record
// writes final values of distinct keys, so applying one twice is harmless.
func (s *Store) replay(ctx context.Context) error {
	commit, err := s.client.Get(ctx, s.commitKey())
	if err != nil {
		return fmt.Errorf("read the journal commit: %w", err)
	}
	if len(commit.Kvs) == 0 {
		return nil
	}
	var n int
	if _, err := fmt.Sscan(string(commit.Kvs[0].Value), &n); err != nil {
		return fmt.Errorf("journal commit %q: %w", commit.Kvs[0].Value, err)
	}
	return s.apply(ctx, n, func(i int) ([]rawOp, error) {
		resp, err := s.client.Get(ctx, fmt.Sprintf("%s%08d", s.journalPrefix(), i))
		if err != nil {
			return nil, fmt.Errorf("read the journal: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return nil, fmt.Errorf("journal record %d of %d is missing", i, n)
		}
		rec, err := decodeRecord(resp.Kvs[0].Value)
		if err != nil {
			return nil, fmt.Errorf("journal record %d: %w", i, err)
		}
		return rec, nil
	})
}

// apply applies the n records of the committed journal, each got from
// record, then removes the journal.
func (s *Store) apply(ctx context.Context, n int, record func(i int) ([]rawOp, error)) error {
	for i := range n {
		rec, err := record(i)
		if err != nil {
			return err
		}
		if err := s.txn(ctx, rec...); err != nil {
			return fmt.Errorf("apply journal record %d: %w", i, err)
		}
	}
	if err := s.txn(ctx, rawOp{Key: s.commitKey(), Delete: true}, rawOp{Key: s.journalPrefix(), Delete: true, IsPrefix: true}); err != nil {
		return fmt.Errorf("remove the applied journal: %w", err)
	}
	return nil
}

func encodeRecord(rec []rawOp) []byte {
	var b []byte
	for _, op := range rec {
		flags := byte(0)
		if op.Delete {
			flags |= 1
		}
		if op.IsPrefix {
			flags |= 2
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(len(op.Key)))
		b = append(b, op.Key...)
		b = binary.AppendUvarint(b, uint64(len(op.Value)))
		b = append(b, op.Value...)
	}
	return b
}

func decodeRecord(b []byte) ([]rawOp, error) {
	var rec []rawOp
	for len(b) > 0 {
		flags := b[0]
		b = b[1:]
		var fields [2][]byte
		for i := range fields {
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return nil, errors.New("truncated record")
			}
			fields[i], b = b[k:k+int(l)], b[k+int(l):]
		}
		rec = append(rec, rawOp{Key: string(fields[0]), Value: fields[1], Delete: flags&1 != 0, IsPrefix: flags&2 != 0})
	}
	return rec, nil
}

// Recover brings the state to a batch boundary at the start of a term: it
// finishes a batch that a previous leader committed but did not finish
// applying, discards one it did not commit, removes parts that no value
// names, and learns which values are chunked.
func (s *Store) Recover(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.replay(ctx); err != nil {
		return err
	}
	if err := s.txn(ctx, rawOp{Key: s.journalPrefix(), Delete: true, IsPrefix: true}); err != nil {
		return fmt.Errorf("discard an uncommitted journal: %w", err)
	}
	partBase := s.prefix + "part/"
	resp, err := s.client.Get(ctx, partBase, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list the parts of large values: %w", err)
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		rel := strings.TrimPrefix(string(kv.Key), partBase)
		bucket, rest, ok1 := strings.Cut(rel, "\x00")
		key, genPart, ok2 := strings.Cut(rest, "\x00")
		gen, _, ok3 := strings.Cut(genPart, "/")
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		dk := s.dataKey(bucket, key)
		if seen[dk+"\x00"+gen] {
			continue
		}
		seen[dk+"\x00"+gen] = true
		live := false
		if m, err := s.client.Get(ctx, dk); err == nil && len(m.Kvs) == 1 && len(m.Kvs[0].Value) > 0 && m.Kvs[0].Value[0] == tagParts {
			if g, _, _, err := parseManifest(m.Kvs[0].Value); err == nil && g == gen {
				live = true
			}
		} else if err != nil {
			return fmt.Errorf("read %s: %w", dk, err)
		}
		if live {
			s.gens[dk] = gen
			continue
		}
		if err := s.txn(ctx, rawOp{Key: s.partPrefix(dk, gen), Delete: true, IsPrefix: true}); err != nil {
			return fmt.Errorf("remove orphan parts of %s: %w", dk, err)
		}
	}
	return nil
}
