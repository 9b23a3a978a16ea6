// Package store owns gitfleet's embedded key-value state: the Store
// interface that the coordinator and the nodes persist through, and its
// bbolt implementation. Keys live in named buckets, created on demand.
//
// The package knows nothing about what the keys mean: it must not encode
// placement, membership or catalog rules, and it must not hand out memory
// that belongs to the database (every returned value is a copy).
package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrStop, returned by a Scan callback, ends the scan early without error.
var ErrStop = errors.New("store: stop scan")

// Store is the key-value state that the daemons persist through. bbolt
// implements it now; an etcd implementation can satisfy it later.
type Store interface {
	// Get returns a copy of the value of key, and whether it exists.
	Get(ctx context.Context, bucket, key string) ([]byte, bool, error)
	Put(ctx context.Context, bucket, key string, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, bucket, key string) error
	// Scan calls fn for each key that starts with prefix, in key order.
	// It stops at the first error of fn and returns it, or returns nil if
	// that error is ErrStop. Scan is not a snapshot: fn may write to the
	// store, and writes made during the scan may or may not be seen.
	Scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error
	// Batch applies ops atomically: all of them or none.
	Batch(ctx context.Context, ops []Op) error
	Close() error
}

// Op is one write of a Batch: a put of Value, or a delete if Delete is set.
type Op struct {
	Bucket, Key string
	Value       []byte
	Delete      bool
}

// lockTimeout bounds the wait for the database file lock, so that a second
// gitfleet on the same data directory fails fast instead of hanging.
const lockTimeout = time.Second

// scanChunk is how many entries Scan reads per read transaction. Reading in
// chunks keeps read transactions short (a long one stops bbolt from reusing
// freed pages) and lets the callback write to the store.
const scanChunk = 256

// Bolt is a Store in a single bbolt file. It is safe for concurrent use.
type Bolt struct {
	db   *bolt.DB
	path string
}

var _ Store = (*Bolt)(nil)

// OpenBolt opens (or creates) the database at path, creating its parent
// directory. Writes are synced to disk before they return.
func OpenBolt(path string) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: create directory for %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store: another gitfleet is using %s (stop it or choose another data directory): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &Bolt{db: db, path: path}, nil
}

// Get returns a copy of the value of key in bucket, and whether it exists.
// A missing bucket holds no keys.
func (s *Bolt) Get(ctx context.Context, bucket, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	var value []byte
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		// A cursor tells an empty value apart from a missing key.
		k, v := b.Cursor().Seek([]byte(key))
		if k != nil && string(k) == key {
			value, found = bytes.Clone(v), true
			if value == nil {
				value = []byte{}
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: get %s/%s: %w", bucket, key, err)
	}
	return value, found, nil
}

// Put sets key in bucket to value.
func (s *Bolt) Put(ctx context.Context, bucket, key string, value []byte) error {
	return s.Batch(ctx, []Op{{Bucket: bucket, Key: key, Value: value}})
}

// Delete removes key from bucket.
func (s *Bolt) Delete(ctx context.Context, bucket, key string) error {
	return s.Batch(ctx, []Op{{Bucket: bucket, Key: key, Delete: true}})
}

// Batch applies ops in one write transaction: if any op fails, none is
// applied. Ops on the same key apply in the order given.
func (s *Bolt) Batch(ctx context.Context, ops []Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// In key order: bbolt writes the random keys of one transaction in time
	// that grows much faster than their number (200,000 puts: 111 s, and
	// 0.9 s in order).
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b Op) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Key, b.Key))
	})
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, op := range ops {
			if err := apply(tx, op); err != nil {
				return err
			}
		}
		return nil
	})
}

func apply(tx *bolt.Tx, op Op) error {
	if op.Delete {
		b := tx.Bucket([]byte(op.Bucket))
		if b == nil {
			return nil
		}
		if err := b.Delete([]byte(op.Key)); err != nil {
			return fmt.Errorf("store: delete %s/%s: %w", op.Bucket, op.Key, err)
		}
		return nil
	}
	b, err := tx.CreateBucketIfNotExists([]byte(op.Bucket))
	if err != nil {
		return fmt.Errorf("store: create bucket %q: %w", op.Bucket, err)
	}
	if err := b.Put([]byte(op.Key), op.Value); err != nil {
		return fmt.Errorf("store: put %s/%s: %w", op.Bucket, op.Key, err)
	}
	return nil
}

type entry struct {
	key   string
	value []byte
}

// Scan calls fn for each key of bucket that starts with prefix, in key
// order, with a copy of its value.
func (s *Bolt) Scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error {
	return s.ScanFrom(ctx, bucket, prefix, prefix, fn)
}

// ScanFrom is Scan that starts at the first key not before start: a page
// of a listing costs what the page holds, not what comes before it.
func (s *Bolt) ScanFrom(ctx context.Context, bucket, prefix, start string, fn func(key string, value []byte) error) error {
	from := []byte(max(prefix, start))
	skipFrom := false // true after the first chunk: from was already seen
	chunk := make([]entry, 0, scanChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk = chunk[:0]
		more := false
		err := s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucket))
			if b == nil {
				return nil
			}
			c := b.Cursor()
			k, v := c.Seek(from)
			if skipFrom && bytes.Equal(k, from) {
				k, v = c.Next()
			}
			for ; k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
				if len(chunk) == scanChunk {
					more = true
					break
				}
				chunk = append(chunk, entry{key: string(k), value: bytes.Clone(v)})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: scan %s/%s: %w", bucket, prefix, err)
		}
		for _, e := range chunk {
			if e.value == nil {
				e.value = []byte{}
			}
			if err := fn(e.key, e.value); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
		if !more {
			return nil
		}
		from, skipFrom = []byte(chunk[len(chunk)-1].key), true
	}
}

// Close closes the database file and releases its lock.
func (s *Bolt) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}
