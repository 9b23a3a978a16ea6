package ha

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/etcdtest"
	"github.com/gitfleet/gitfleet/internal/store"
)

// leaderStore elects a leader under prefix and returns its store.
func leaderStore(t *testing.T, client *clientv3.Client, prefix string) (*Term, *Store) {
	t.Helper()
	// A long lease: these tests are about the data, not about losing it.
	// The campaign's context bounds the term, so it is not one that ends
	// when this helper returns.
	term, err := NewElector(client, prefix, time.Minute, "x:1").Campaign(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = term.Resign(context.Background()) })
	return term, term.store
}

func countKeys(t *testing.T, client *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := client.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// The etcd store keeps the promises of store.Store: copies of values,
// empty values told apart from missing keys, scans in key order under a
// prefix across pages, ErrStop, deletes of missing keys.
func TestStoreBehavesAsAStore(t *testing.T) {
	etcd := etcdtest.Start(t)
	client := dialTest(t, etcd.Endpoint)
	_, s := leaderStore(t, client, "/s1")
	ctx := context.Background()

	if _, ok, err := s.Get(ctx, "b", "missing"); ok || err != nil {
		t.Fatalf("missing key: ok %v err %v", ok, err)
	}
	if err := s.Put(ctx, "b", "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(ctx, "b", "empty"); !ok || err != nil || len(v) != 0 {
		t.Fatalf("empty value: %q %v %v", v, ok, err)
	}
	if err := s.Delete(ctx, "b", "never-there"); err != nil {
		t.Errorf("delete of a missing key: %v", err)
	}
	var ops []store.Op
	for i := range 1234 { // more than a scan page and than one transaction
		ops = append(ops, store.Op{Bucket: "repos", Key: fmt.Sprintf("github.com/o/r%05d", i), Value: []byte(fmt.Sprint(i))})
	}
	ops = append(ops, store.Op{Bucket: "repos", Key: "gitlab.com/x/y", Value: []byte("gl")})
	if err := s.Batch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	// Scan streams; an etcd older than 3.7 is read a page at a time.
	scans := map[string]func(prefix string, fn func(string, []byte) error) error{
		"stream": func(prefix string, fn func(string, []byte) error) error { return s.Scan(ctx, "repos", prefix, fn) },
		"pages": func(prefix string, fn func(string, []byte) error) error {
			s.scanPage = 100
			defer func() { s.scanPage = scanPage }()
			base := s.dataPrefix("repos")
			return s.scanPages(ctx, base, base+prefix, clientv3.GetPrefixRangeEnd(base+prefix), fn)
		},
	}
	for name, scan := range scans {
		n, prev := 0, ""
		err := scan("github.com/", func(k string, v []byte) error {
			if k <= prev {
				t.Fatalf("%s: scan out of order: %q after %q", name, k, prev)
			}
			if want := fmt.Sprintf("github.com/o/r%05d", n); k != want || string(v) != fmt.Sprint(n) {
				t.Fatalf("%s: entry %d: %q=%q, want %q", name, n, k, v, want)
			}
			prev = k
			n++
			return nil
		})
		if err != nil || n != 1234 {
			t.Fatalf("%s: scan: %d entries, %v", name, n, err)
		}
		n = 0
		if err := scan("", func(string, []byte) error {
			n++
			if n == 555 { // within a page, and a chunk of the stream
				return store.ErrStop
			}
			return nil
		}); err != nil || n != 555 {
			t.Errorf("%s: ErrStop: %d entries, %v", name, n, err)
		}
	}
	boom := errors.New("boom")
	if err := s.Scan(ctx, "repos", "", func(string, []byte) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a callback error: %v", err)
	}
	if err := s.Put(ctx, "a/b", "k", nil); err == nil {
		t.Error("a bucket with a slash was accepted")
	}
	if err := s.Put(ctx, "b", "k\x00", nil); err == nil {
		t.Error("a key with NUL was accepted")
	}
}

// Ops on one key in one batch end as the last of them, as in bbolt.
func TestStoreBatchLastOpOnAKeyWins(t *testing.T) {
	etcd := etcdtest.Start(t)
	_, s := leaderStore(t, dialTest(t, etcd.Endpoint), "/s2")
	ctx := context.Background()
	err := s.Batch(ctx, []store.Op{
		{Bucket: "b", Key: "k", Value: []byte("1")},
		{Bucket: "b", Key: "k", Delete: true},
		{Bucket: "b", Key: "k", Value: []byte("3")},
		{Bucket: "b", Key: "gone", Value: []byte("x")},
		{Bucket: "b", Key: "gone", Delete: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.Get(ctx, "b", "k"); string(v) != "3" {
		t.Errorf("k = %q, want 3", v)
	}
	if _, ok, _ := s.Get(ctx, "b", "gone"); ok {
		t.Error("a key put then deleted in one batch exists")
	}
}

// Values larger than etcd takes in one request are kept as parts, and the
// parts of a value replaced or deleted do not stay behind.
func TestStoreLargeValues(t *testing.T) {
	etcd := etcdtest.Start(t)
	client := dialTest(t, etcd.Endpoint)
	_, s := leaderStore(t, client, "/s3")
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB, more than an etcd request
	if err := s.Put(ctx, "meta", "placement", big); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(ctx, "meta", "placement"); err != nil || !ok || !bytes.Equal(v, big) {
		t.Fatalf("large value: %d bytes back (want %d), %v, %v", len(v), len(big), ok, err)
	}
	if n := countKeys(t, client, "/s3/part/"); n < 10 {
		t.Fatalf("%d parts stored for %d bytes", n, len(big))
	}
	found := false
	if err := s.Scan(ctx, "meta", "", func(k string, v []byte) error {
		found = k == "placement" && bytes.Equal(v, big)
		return nil
	}); err != nil || !found {
		t.Errorf("scan of a large value: found %v, %v", found, err)
	}
	// A second large value, then a small one, then none: no part remains.
	big2 := bytes.Repeat([]byte("x"), 700_000)
	if err := s.Put(ctx, "meta", "placement", big2); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.Get(ctx, "meta", "placement"); !bytes.Equal(v, big2) {
		t.Fatalf("replaced large value: %d bytes", len(v))
	}
	if n := countKeys(t, client, "/s3/part/"); n != 3 {
		t.Errorf("%d parts after replacing with a 700 kB value, want 3", n)
	}
	if err := s.Put(ctx, "meta", "placement", []byte("small")); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, client, "/s3/part/"); n != 0 {
		t.Errorf("%d parts left after a small value replaced a large one", n)
	}
	if err := s.Put(ctx, "meta", "placement", big); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "meta", "placement"); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, client, "/s3/data/") + countKeys(t, client, "/s3/part/"); n != 0 {
		t.Errorf("%d keys left after the last delete", n)
	}
}

// A leader that dies in the middle of a large batch: if it had committed
// the journal, the next leader finishes the batch; if not, the next leader
// discards it and nothing of it shows.
func TestStoreLargeBatchSurvivesTheLeadersDeath(t *testing.T) {
	etcd := etcdtest.Start(t)
	client := dialTest(t, etcd.Endpoint)
	ctx := context.Background()
	batch := func(tag string) []store.Op {
		var ops []store.Op
		for i := range 500 {
			ops = append(ops, store.Op{Bucket: "repos", Key: fmt.Sprintf("k%04d", i), Value: []byte(tag)})
		}
		return append(ops, store.Op{Bucket: "meta", Key: "placement", Value: bytes.Repeat([]byte(tag), 300_000)})
	}
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			prefix := fmt.Sprintf("/s4-%v", committed)
			term, s := leaderStore(t, client, prefix)
			if err := s.Batch(ctx, batch("a")); err != nil {
				t.Fatal(err)
			}
			// The leader writes the journal of batch b, and dies before
			// applying it (committed) or before committing it.
			raw, _, err := s.plan(batch("b"))
			if err != nil {
				t.Fatal(err)
			}
			records := split(raw)
			if len(records) < 3 {
				t.Fatalf("%d records: the batch should need a journal", len(records))
			}
			if committed {
				if err := s.writeJournal(ctx, records); err != nil {
					t.Fatal(err)
				}
				// Part of it applied: the first record.
				if err := s.txn(ctx, records[0]...); err != nil {
					t.Fatal(err)
				}
			} else {
				for i, rec := range records[:2] {
					b := encodeRecord(rec)
					if err := s.txn(ctx, rawOp{Key: fmt.Sprintf("%s%08d", s.journalPrefix(), i), Value: b}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := client.Revoke(ctx, term.sess.Lease()); err != nil {
				t.Fatal(err)
			}
			_, next := leaderStore(t, client, prefix)
			want := "a"
			if committed {
				want = "b"
			}
			n := 0
			if err := next.Scan(ctx, "repos", "", func(k string, v []byte) error {
				if string(v) != want {
					t.Fatalf("%s = %q after the takeover, want %q", k, v, want)
				}
				n++
				return nil
			}); err != nil || n != 500 {
				t.Fatalf("%d repositories, %v", n, err)
			}
			if v, _, err := next.Get(ctx, "meta", "placement"); err != nil || !bytes.Equal(v, bytes.Repeat([]byte(want), 300_000)) {
				t.Errorf("placement after the takeover: %d bytes, %v", len(v), err)
			}
			if n := countKeys(t, client, prefix+"/journal"); n != 0 {
				t.Errorf("%d journal keys left after the takeover", n)
			}
			if n := countKeys(t, client, prefix+"/part/"); n != 2 {
				t.Errorf("%d parts stored, want the 2 of the one large value", n)
			}
			// And the new leader writes on top.
			if err := next.Batch(ctx, batch("c")); err != nil {
				t.Fatal(err)
			}
			if v, _, _ := next.Get(ctx, "repos", "k0499"); string(v) != "c" {
				t.Errorf("k0499 = %q after the new leader's batch", v)
			}
		})
	}
}

// benchTerm elects a leader on a fresh embedded etcd, for the length of
// the benchmark.
func benchTerm(b *testing.B) *Term {
	etcd := etcdtest.Start(b)
	ctx := context.Background()
	client, err := Dial(ctx, []string{etcd.Endpoint}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	term, err := NewElector(client, "/bench", time.Minute, "x:1").Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = term.Resign(ctx) })
	return term
}

// The coordinator's persist batches through etcd: a second's worth of
// status changes (one transaction), a large change (journaled), and a
// placement snapshot of 2 MB (in parts). Compare with the store package's
// BenchmarkBatch (bbolt, synced).
func BenchmarkBatch(b *testing.B) {
	ctx := context.Background()
	term := benchTerm(b)
	status := bytes.Repeat([]byte("s"), 64)
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("statuses=%d", n), func(b *testing.B) {
			ops := make([]store.Op, n)
			for i := range ops {
				ops[i] = store.Op{Bucket: "repos", Key: fmt.Sprintf("github.com/o/r%06d", i), Value: status}
			}
			for b.Loop() {
				if err := term.store.Batch(ctx, ops); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("snapshot=2MB", func(b *testing.B) {
		snap := bytes.Repeat([]byte("p"), 2<<20)
		for b.Loop() {
			if err := term.store.Put(ctx, "meta", "placement", snap); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScan reads back 100,000 then 300,000 repository statuses of
// about 150 bytes, as a new leader does when it restores its state:
// streamed (Scan), and a page at a time (an etcd without RangeStream),
// where etcd counts the rest of the range for each page, so that the time
// per key grows with the number of keys. It reports the time per key.
//
//	go test ./internal/ha -run '^$' -bench Scan -benchtime 2x
func BenchmarkScan(b *testing.B) {
	ctx := context.Background()
	term := benchTerm(b)
	st := term.store
	base := st.dataPrefix("repos")
	status := bytes.Repeat([]byte("s"), 150)
	stored := 0
	for _, n := range benchsize.Of([]int{100000, 300000}, []int{1000}) {
		ops := make([]store.Op, 0, 10000)
		for ; stored < n; stored++ {
			ops = append(ops, store.Op{Bucket: "repos", Key: fmt.Sprintf("github.com/o/r%07d", stored), Value: status})
			if len(ops) == cap(ops) || stored == n-1 {
				if err := st.Batch(ctx, ops); err != nil {
					b.Fatal(err)
				}
				ops = ops[:0]
			}
		}
		for _, page := range []int64{0, 500, 5000} {
			name := fmt.Sprintf("keys=%d/stream", n)
			if page > 0 {
				name = fmt.Sprintf("keys=%d/pages=%d", n, page)
			}
			b.Run(name, func(b *testing.B) {
				st.scanPage = page
				for b.Loop() {
					seen := 0
					count := func(string, []byte) error { seen++; return nil }
					var err error
					if page == 0 {
						err = st.Scan(ctx, "repos", "", count)
					} else {
						err = st.scanPages(ctx, base, base, clientv3.GetPrefixRangeEnd(base), count)
					}
					if err != nil || seen != n {
						b.Fatalf("scan: %v, %d keys", err, seen)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
			})
		}
	}
}
