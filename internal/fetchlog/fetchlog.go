// Package fetchlog owns a node's fetch log: one entry per check, fetch,
// clone and pull (and on a full node, what it learns of its owners'
// checks), kept in the node's embedded store so that it outlasts a
// restart, bounded by a count per repository and by age.
//
// Entries are kept twice: by repository (newest first), and by time
// (newest first, with a second index of the failed ones), so that a page
// of either listing costs what the page holds. Trimming is cheap too: the
// entries past their age are found by seeking the time index, and those
// past the count of a repository by a scan of that repository's few
// entries, only when a write made it grow past its bound. Appends are
// buffered and written in one transaction per flush.
//
// The package knows nothing of what the work was: the node fills in the
// entries; it must not run git or reach the network.
package fetchlog

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/store"
)

// The results of an entry.
const (
	ResultOK        = "ok"
	ResultFailed    = "failed"
	ResultCancelled = "cancelled"
)

// MaxRefNames is how many of the refs an entry changed it names.
const MaxRefNames = 20

// MaxRewrites is how many of the refs whose old tips an entry left behind
// it keeps with their IDs; the rest are counted (RewritesOmitted).
const MaxRewrites = 256

// Rewrite is a ref whose old tip a piece of work left behind: a deleted
// ref (New is ""), a moved tag or a force-pushed branch. Old is what undoes
// it by hand (git update-ref Ref Old), while the object is still stored.
type Rewrite struct {
	Ref string `json:"ref"`
	Old string `json:"old"`
	New string `json:"new,omitempty"`
}

// Move is a ref that a piece of work created (Old is ""), moved or
// deleted (New is "").
type Move struct {
	Ref string `json:"ref"`
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

// Entry is one piece of work on one repository.
type Entry struct {
	// ID orders entries (newest first) and is the cursor of a listing
	// (set when read).
	ID         string    `json:"id,omitempty"`
	Key        string    `json:"key"`
	At         time.Time `json:"at"`             // when the work started
	Kind       string    `json:"kind"`           // check, fetch, clone, pull, repair, maintenance
	Node       uint32    `json:"node,omitempty"` // the node that did the work
	From       uint32    `json:"from,omitempty"` // a pull's source node
	Result     string    `json:"result"`         // ok, failed, cancelled
	Changed    bool      `json:"changed"`
	DurationMs int64     `json:"duration_ms,omitempty"`
	// RefsChanged counts the refs created, moved or deleted; Refs names
	// the first MaxRefNames of them, in order.
	RefsChanged int      `json:"refs_changed,omitempty"`
	Refs        []string `json:"refs,omitempty"`
	// Moves are the refs of Refs with their old and new IDs.
	Moves      []Move `json:"moves,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	// Rewrites are the deleted, moved-tag and force-pushed refs with
	// their old and new IDs, sorted by ref, the first MaxRewrites of them;
	// RewritesOmitted counts the rest.
	Rewrites        []Rewrite `json:"rewrites,omitempty"`
	RewritesOmitted int       `json:"rewrites_omitted,omitempty"`
	// Head is HEAD's switch to another branch (Ref "HEAD", Old and New
	// the branches it named), when the work followed one: the upstream's
	// default branch changed.
	Head *Move `json:"head,omitempty"`
	// RenamedTo is the upstream's new name, as a key: on a check that met
	// the git server's redirect (the owner's), and on the entry of kind
	// rename a full node writes when the coordinator first says a
	// repository is renamed.
	RenamedTo string `json:"renamed_to,omitempty"`
}

// DB is the part of the store that the log needs (store.Bolt has it).
type DB interface {
	Batch(ctx context.Context, ops []store.Op) error
	ScanFrom(ctx context.Context, bucket, prefix, start string, fn func(key string, value []byte) error) error
}

// Buckets: by repository ("<key> NUL <id>"), by time ("<id>"), and the
// failed ones by time. An ID is the start time inverted, so that the
// newest comes first in key order, and a sequence number.
const (
	bucketByRepo   = "fetchlog.repo"
	bucketByTime   = "fetchlog.time"
	bucketFailures = "fetchlog.failed"
)

// Config bounds the log.
type Config struct {
	PerRepo int           // entries kept per repository (<= 0: 100)
	MaxAge  time.Duration // entries older are dropped (<= 0: 30 days)
}

// Log is a node's fetch log. It is safe for concurrent use.
type Log struct {
	db  DB
	clk clock.Clock
	log *slog.Logger
	cfg Config

	mu      sync.Mutex
	seq     uint64
	pending []Entry
	// counts holds the number of stored entries of the repositories
	// written since the start (read once from the store on first write).
	counts map[string]int
	// flushMu serializes flushes.
	flushMu sync.Mutex
	// full wakes Run when maxPending entries wait (Append never writes).
	full chan struct{}
	// lastFlush is when the last flush began (guarded by flushMu).
	lastFlush time.Time
}

// New returns the log kept in db.
func New(db DB, cfg Config, clk clock.Clock, log *slog.Logger) *Log {
	if cfg.PerRepo <= 0 {
		cfg.PerRepo = 100
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 30 * 24 * time.Hour
	}
	// The sequence starts from the clock, so that IDs stay unique across
	// restarts even for entries of the same instant.
	return &Log{db: db, clk: clk, log: log, cfg: cfg, counts: map[string]int{}, seq: uint64(clk.Now().UnixNano()),
		full: make(chan struct{}, 1)}
}

// maxPending is how many appended entries make Run flush at once, rather
// than at its next second.
const maxPending = 1024

// maxKept bounds the entries kept in memory while writes fail: past it the
// oldest are dropped (and said so), so that a broken disk cannot make the
// node's memory grow.
const maxKept = 64 * maxPending

// Append adds e to the log (written at the next flush). Its Refs and Moves
// are cut to MaxRefNames, its Rewrites to MaxRewrites; credentials in its error are redacted (a public page
// shows it).
func (l *Log) Append(e Entry) {
	e.Error = repokey.Redact(e.Error)
	if len(e.Refs) > MaxRefNames {
		e.Refs = e.Refs[:MaxRefNames]
	}
	if len(e.Moves) > MaxRefNames {
		e.Moves = e.Moves[:MaxRefNames]
	}
	if len(e.Rewrites) > MaxRewrites {
		e.RewritesOmitted += len(e.Rewrites) - MaxRewrites
		e.Rewrites = e.Rewrites[:MaxRewrites]
	}
	if e.Result == "" {
		e.Result = ResultOK
	}
	e.At = e.At.UTC()
	l.mu.Lock()
	l.seq++
	e.ID = entryID(e.At, l.seq)
	l.pending = append(l.pending, e)
	full := len(l.pending) >= maxPending
	l.mu.Unlock()
	if full { // the caller may hold its own locks: Run writes
		select {
		case l.full <- struct{}{}:
		default:
		}
	}
}

// Run flushes the log every second and once more when ctx ends, and drops
// the entries past their age every minute.
func (l *Log) Run(ctx context.Context) {
	lastExpiry := time.Time{}
	for {
		select {
		case <-ctx.Done():
			if err := l.Flush(context.Background()); err != nil {
				l.log.Warn("fetch log: write failed", "err", err)
			}
			return
		case <-l.clk.After(time.Second):
		case <-l.full:
		}
		if err := l.Flush(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("fetch log: write failed", "err", err)
		}
		if now := l.clk.Now(); now.Sub(lastExpiry) >= time.Minute {
			lastExpiry = now
			if err := l.Expire(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("fetch log: dropping old entries failed", "err", err)
			}
		}
	}
}

// Flush writes the appended entries, and trims the repositories that grew
// past their bound, in one transaction.
// A batch that could not be written is kept for the next flush (up to
// maxKept entries). The write itself is not cut short by ctx's end (a
// reader that went away), only by the store.
func (l *Log) Flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.lastFlush = l.clk.Now()
	l.mu.Lock()
	batch := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := l.write(context.WithoutCancel(ctx), batch)
	if err != nil {
		l.mu.Lock()
		l.pending = append(batch, l.pending...)
		if drop := len(l.pending) - maxKept; drop > 0 {
			l.log.Warn("fetch log: writes keep failing; dropping the oldest entries", "dropped", drop)
			l.pending = append([]Entry(nil), l.pending[drop:]...)
		}
		l.mu.Unlock()
	}
	return err
}

// write stores batch, and trims the repositories that grew past their
// bound, in one transaction.
func (l *Log) write(ctx context.Context, batch []Entry) error {
	ops := make([]store.Op, 0, 3*len(batch))
	added := map[string]int{}
	for _, e := range batch {
		v, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("fetch log: encode an entry of %s: %w", e.Key, err)
		}
		ops = append(ops, store.Op{Bucket: bucketByRepo, Key: e.Key + "\x00" + e.ID, Value: v},
			store.Op{Bucket: bucketByTime, Key: e.ID, Value: v})
		if e.Result == ResultFailed {
			ops = append(ops, store.Op{Bucket: bucketFailures, Key: e.ID, Value: v})
		}
		added[e.Key]++
	}
	// A repository is trimmed once it holds a tenth more than its bound,
	// so that one at its bound is not scanned at each write.
	slack := l.cfg.PerRepo/10 + 1
	for key, n := range added {
		count, known := l.counts[key]
		if !known {
			var err error
			if count, err = l.countOf(ctx, key); err != nil {
				return err
			}
		}
		count += n
		if count > l.cfg.PerRepo+slack-1 {
			trim, err := l.trimOps(ctx, key, l.cfg.PerRepo-n)
			if err != nil {
				return err
			}
			ops = append(ops, trim...)
			count = max(l.cfg.PerRepo-n, 0) + n
		}
		l.counts[key] = count
	}
	if err := l.db.Batch(ctx, ops); err != nil {
		// The counts may be off now: read them again when next needed.
		for key := range added {
			delete(l.counts, key)
		}
		return fmt.Errorf("fetch log: write %d entries: %w", len(batch), err)
	}
	return nil
}

// countOf counts the stored entries of key.
func (l *Log) countOf(ctx context.Context, key string) (int, error) {
	n := 0
	err := l.db.ScanFrom(ctx, bucketByRepo, key+"\x00", "", func(string, []byte) error { n++; return nil })
	if err != nil {
		return 0, fmt.Errorf("fetch log: count the entries of %s: %w", key, err)
	}
	return n, nil
}

// trimOps deletes the stored entries of key past the newest keep ones.
func (l *Log) trimOps(ctx context.Context, key string, keep int) ([]store.Op, error) {
	var ops []store.Op
	i := 0
	err := l.db.ScanFrom(ctx, bucketByRepo, key+"\x00", "", func(k string, v []byte) error {
		if i++; i <= keep {
			return nil
		}
		id := strings.TrimPrefix(k, key+"\x00")
		ops = append(ops, store.Op{Bucket: bucketByRepo, Key: k, Delete: true},
			store.Op{Bucket: bucketByTime, Key: id, Delete: true},
			store.Op{Bucket: bucketFailures, Key: id, Delete: true})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fetch log: trim the entries of %s: %w", key, err)
	}
	return ops, nil
}

// expireBatch is how many old entries Expire deletes per transaction.
const expireBatch = 1000

// Expire drops the entries older than the log's age bound. It reads only
// those: they are at the end of the time index.
func (l *Log) Expire(ctx context.Context) error {
	if err := l.Flush(ctx); err != nil { // the pending entries age too
		return err
	}
	cutoff := entryID(l.clk.Now().Add(-l.cfg.MaxAge-time.Nanosecond), 0) // an entry of the cutoff itself stays
	for {
		var ops []store.Op
		keys := map[string]int{}
		err := l.db.ScanFrom(ctx, bucketByTime, "", cutoff, func(id string, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return nil // not ours to read: left alone
			}
			ops = append(ops, store.Op{Bucket: bucketByTime, Key: id, Delete: true},
				store.Op{Bucket: bucketByRepo, Key: e.Key + "\x00" + id, Delete: true},
				store.Op{Bucket: bucketFailures, Key: id, Delete: true})
			keys[e.Key]++
			if len(ops) >= 3*expireBatch {
				return store.ErrStop
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fetch log: drop the entries older than %v: %w", l.cfg.MaxAge, err)
		}
		if len(ops) == 0 {
			return nil
		}
		l.flushMu.Lock()
		err = l.db.Batch(ctx, ops)
		for key, n := range keys {
			if c, ok := l.counts[key]; ok {
				l.counts[key] = max(0, c-n)
			}
		}
		l.flushMu.Unlock()
		if err != nil {
			return fmt.Errorf("fetch log: drop the entries older than %v: %w", l.cfg.MaxAge, err)
		}
		if len(ops) < 3*expireBatch {
			return nil
		}
	}
}

// Query selects entries. Entries come newest first.
type Query struct {
	Key    string    // one repository's entries ("": all)
	Failed bool      // only the failed ones
	Result string    // only those with this result ("": any)
	Node   uint32    // only those of this node (0: any)
	Since  time.Time // none older (zero: any age)
	Before string    // the entries after this cursor (an Entry.ID; "": from the newest)
	Limit  int       // at most this many (<= 0 or over MaxLimit: MaxLimit)
}

// MaxLimit is the most entries one List returns.
const MaxLimit = 1000

// maxExamined bounds the entries one List reads when a filter has no
// index of its own (Node, Result): it then returns a cursor to go on from.
const maxExamined = 20 * MaxLimit

// List returns the entries that q selects, and the cursor of the next
// page ("" when there is none). It reads the page from the index that
// fits (a repository's entries, the failed ones, or all by time).
func (l *Log) List(ctx context.Context, q Query) ([]Entry, string, error) {
	if err := l.flushFor(ctx, q); err != nil {
		return nil, "", err
	}
	if q.Limit <= 0 || q.Limit > MaxLimit {
		q.Limit = MaxLimit
	}
	if q.Key != "" && q.Limit > l.cfg.PerRepo {
		q.Limit = l.cfg.PerRepo
	}
	if q.Result == ResultFailed {
		q.Failed = true
	}
	bucket, prefix := bucketByTime, ""
	switch {
	case q.Key != "":
		bucket, prefix = bucketByRepo, q.Key+"\x00"
	case q.Failed:
		bucket = bucketFailures
	}
	start := prefix
	if q.Before != "" {
		start = prefix + q.Before + "\x00" // just after the cursor
	}
	var since string
	if !q.Since.IsZero() {
		since = entryID(q.Since.Add(-time.Nanosecond), 0) // after every entry of Since itself
	}
	var out []Entry
	var next, last string
	examined := 0
	err := l.db.ScanFrom(ctx, bucket, prefix, start, func(k string, v []byte) error {
		id := strings.TrimPrefix(k, prefix)
		if since != "" && id > since {
			return store.ErrStop // older than Since: so is the rest
		}
		if examined++; examined > maxExamined {
			next = last // the page is short: go on from there
			return store.ErrStop
		}
		last = id
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil
		}
		e.ID = id
		if q.Failed && e.Result != ResultFailed || q.Result != "" && e.Result != q.Result ||
			q.Node != 0 && e.Node != q.Node || q.Key != "" && e.Key != q.Key {
			return nil
		}
		if len(out) == q.Limit {
			next = out[len(out)-1].ID
			return store.ErrStop
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("fetch log: list: %w", err)
	}
	return out, next, nil
}

// entryID is the ID of an entry started at t: the time inverted (so that
// the newest sorts first) in fixed-width hex, then the sequence number.
// seq 0 is the ID just before every entry of t.
func entryID(t time.Time, seq uint64) string {
	inv := ^uint64(t.UnixNano())
	s := strconv.FormatUint(inv, 16)
	id := strings.Repeat("0", 16-len(s)) + s
	if seq == 0 {
		return id
	}
	return id + "." + strconv.FormatUint(seq, 36)
}

// flushFor writes the pending entries before a listing that could show
// them: a repository's own (at once), or any for a listing of all, unless
// the last flush began less than a second ago (Run's own pace). A public
// read thus does not turn into a synced write at every request.
func (l *Log) flushFor(ctx context.Context, q Query) error {
	l.mu.Lock()
	need := false
	for _, e := range l.pending {
		if q.Key == "" || e.Key == q.Key {
			need = true
			break
		}
	}
	l.mu.Unlock()
	if !need {
		return nil
	}
	if q.Key == "" {
		l.flushMu.Lock()
		recent := l.clk.Now().Sub(l.lastFlush) < time.Second
		l.flushMu.Unlock()
		if recent {
			return nil
		}
	}
	return l.Flush(ctx)
}
