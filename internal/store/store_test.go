package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
)

func openTemp(t testing.TB) (*Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nested", "dir", "state.db")
	s, err := OpenBolt(path)
	if err != nil {
		t.Fatalf("OpenBolt: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func mustGet(t *testing.T, s Store, bucket, key string) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.Get(context.Background(), bucket, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", bucket, key, err)
	}
	return v, ok
}

func TestPutGetDeleteRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)

	if _, ok := mustGet(t, s, "nodes", "7"); ok {
		t.Fatal("Get in a bucket never written: found, want missing")
	}
	if err := s.Put(ctx, "nodes", "7", []byte("alive")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	v, ok := mustGet(t, s, "nodes", "7")
	if !ok || string(v) != "alive" {
		t.Fatalf("Get = %q, %v; want \"alive\", true", v, ok)
	}
	if _, ok := mustGet(t, s, "other", "7"); ok {
		t.Fatal("key leaked into another bucket")
	}
	if err := s.Delete(ctx, "nodes", "7"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok := mustGet(t, s, "nodes", "7"); ok {
		t.Fatal("Get after Delete: found, want missing")
	}
	if err := s.Delete(ctx, "nodes", "7"); err != nil {
		t.Fatalf("Delete of a missing key: %v, want nil", err)
	}
	if err := s.Delete(ctx, "never", "7"); err != nil {
		t.Fatalf("Delete in a missing bucket: %v, want nil", err)
	}
}

func TestEmptyValueIsFoundAndNotNil(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Put(context.Background(), "b", "k", nil); err != nil {
		t.Fatalf("Put: %v", err)
	}
	v, ok := mustGet(t, s, "b", "k")
	if !ok || v == nil || len(v) != 0 {
		t.Fatalf("Get = %#v, %v; want empty non-nil, true", v, ok)
	}
}

func TestGetReturnsACopy(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.Put(ctx, "b", "k", []byte("original")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	v, _ := mustGet(t, s, "b", "k")
	copy(v, "XXXXXXXX")
	// Writes after the read transaction would fault or corrupt if v
	// pointed into bbolt's read-only mmap.
	for i := range 100 {
		if err := s.Put(ctx, "b", fmt.Sprintf("fill-%03d", i), make([]byte, 1024)); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	again, _ := mustGet(t, s, "b", "k")
	if string(again) != "original" {
		t.Fatalf("stored value changed to %q by editing a returned value", again)
	}
}

func TestScan(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	// Written out of order; more than one scan chunk under "repo/".
	var ops []Op
	var wantRepos []string
	for i := 2*scanChunk + 10; i >= 0; i-- {
		k := fmt.Sprintf("repo/%04d", i)
		ops = append(ops, Op{Bucket: "b", Key: k, Value: []byte(k)})
		wantRepos = append(wantRepos, k)
	}
	slices.Sort(wantRepos)
	ops = append(ops,
		Op{Bucket: "b", Key: "repo", Value: []byte("repo")},
		Op{Bucket: "b", Key: "repn", Value: []byte("before")},
		Op{Bucket: "b", Key: "rep", Value: []byte("shorter")},
		Op{Bucket: "b", Key: "rept", Value: []byte("after")},
		Op{Bucket: "other", Key: "repo/x", Value: []byte("other bucket")},
	)
	if err := s.Batch(ctx, ops); err != nil {
		t.Fatalf("Batch: %v", err)
	}
	wantValue := map[string]string{}
	for _, op := range ops {
		if op.Bucket == "b" {
			wantValue[op.Key] = string(op.Value)
		}
	}

	tests := []struct {
		name   string
		bucket string
		prefix string
		stopAt int // stop with ErrStop after this many keys; 0 = never
		want   []string
	}{
		{name: "prefix selects only matching keys in key order", bucket: "b", prefix: "repo/", want: wantRepos},
		{name: "prefix equal to a key includes that key", bucket: "b", prefix: "repo", want: append([]string{"repo"}, wantRepos...)},
		{name: "empty prefix scans the whole bucket", bucket: "b", prefix: "", want: append([]string{"rep", "repn", "repo"}, append(slices.Clone(wantRepos), "rept")...)},
		{name: "prefix matching nothing calls nothing", bucket: "b", prefix: "zzz", want: nil},
		{name: "missing bucket calls nothing", bucket: "nope", prefix: "", want: nil},
		{name: "ErrStop ends the scan early", bucket: "b", prefix: "repo/", stopAt: 3, want: wantRepos[:3]},
		{name: "ErrStop across a chunk boundary", bucket: "b", prefix: "repo/", stopAt: scanChunk + 1, want: wantRepos[:scanChunk+1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := s.Scan(ctx, tt.bucket, tt.prefix, func(k string, v []byte) error {
				if string(v) != wantValue[k] {
					t.Errorf("value of %q = %q, want %q", k, v, wantValue[k])
				}
				got = append(got, k)
				if tt.stopAt > 0 && len(got) == tt.stopAt {
					return ErrStop
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Scan keys = %d keys %v...; want %d keys %v...", len(got), head(got), len(tt.want), head(tt.want))
			}
		})
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func TestScanReturnsTheCallbackError(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	for _, k := range []string{"a", "b", "c"} {
		if err := s.Put(ctx, "b", k, []byte(k)); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	boom := errors.New("boom")
	calls := 0
	err := s.Scan(ctx, "b", "", func(string, []byte) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("Scan = %v after %d calls; want boom after 1", err, calls)
	}
}

func TestScanCallbackMayWriteToTheStore(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	for i := range 3 * scanChunk {
		if err := s.Put(ctx, "b", fmt.Sprintf("k%04d", i), []byte("v")); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	seen := 0
	err := s.Scan(ctx, "b", "k", func(k string, _ []byte) error {
		seen++
		return s.Delete(ctx, "b", k)
	})
	if err != nil {
		t.Fatalf("Scan deleting as it goes: %v", err)
	}
	if seen != 3*scanChunk {
		t.Fatalf("Scan saw %d keys, want %d", seen, 3*scanChunk)
	}
	if _, ok := mustGet(t, s, "b", "k0000"); ok {
		t.Fatal("key deleted during the scan is still there")
	}
}

func TestBatchIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.Put(ctx, "b", "keep", []byte("old")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	err := s.Batch(ctx, []Op{
		{Bucket: "b", Key: "new", Value: []byte("1")},
		{Bucket: "b", Key: "keep", Delete: true},
		{Bucket: "fresh", Key: "x", Value: []byte("2")},
		{Bucket: "b", Key: "", Value: []byte("an empty key is invalid")},
	})
	if err == nil {
		t.Fatal("Batch with an invalid op succeeded")
	}
	if _, ok := mustGet(t, s, "b", "new"); ok {
		t.Error("put before the failing op was applied")
	}
	if v, ok := mustGet(t, s, "b", "keep"); !ok || string(v) != "old" {
		t.Errorf("delete before the failing op was applied: %q, %v", v, ok)
	}
	if _, ok := mustGet(t, s, "fresh", "x"); ok {
		t.Error("bucket created before the failing op survived")
	}

	if err := s.Batch(ctx, []Op{
		{Bucket: "b", Key: "new", Value: []byte("1")},
		{Bucket: "b", Key: "keep", Delete: true},
	}); err != nil {
		t.Fatalf("valid Batch: %v", err)
	}
	if _, ok := mustGet(t, s, "b", "new"); !ok {
		t.Error("valid Batch: put not applied")
	}
	if _, ok := mustGet(t, s, "b", "keep"); ok {
		t.Error("valid Batch: delete not applied")
	}
}

func TestCanceledContextWritesNothing(t *testing.T) {
	s, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "b", "k", []byte("v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a canceled context = %v, want context.Canceled", err)
	}
	if _, ok := mustGet(t, s, "b", "k"); ok {
		t.Fatal("Put with a canceled context wrote")
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	if err := s.Put(ctx, "b", "k", []byte("v")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := OpenBolt(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if v, ok := mustGet(t, s2, "b", "k"); !ok || string(v) != "v" {
		t.Fatalf("after reopen Get = %q, %v; want \"v\", true", v, ok)
	}
}

func TestSecondOpenOfTheSameFileFailsClearly(t *testing.T) {
	_, path := openTemp(t)
	s2, err := OpenBolt(path)
	if err == nil {
		s2.Close()
		t.Fatal("second OpenBolt of a file in use succeeded")
	}
	want := "another gitfleet is using " + path
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %q, want it to contain %q", err, want)
	}
}

func BenchmarkBatch1000Puts(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b)
	const n = 1000
	value := make([]byte, 100)
	ops := make([]Op, n)
	round := 0
	for b.Loop() {
		for i := range ops {
			ops[i] = Op{Bucket: "bench", Key: fmt.Sprintf("repo/%d/%06d", round, i), Value: value}
		}
		round++
		if err := s.Batch(ctx, ops); err != nil {
			b.Fatalf("Batch: %v", err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "puts/s")
}

func TestBatchAppliesOpsOnOneKeyInOrder(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	ops := []Op{
		{Bucket: "b", Key: "gone", Value: []byte("1")},
		{Bucket: "a", Key: "z", Value: []byte("z")},
		{Bucket: "b", Key: "back", Delete: true},
		{Bucket: "b", Key: "gone", Delete: true},
		{Bucket: "b", Key: "back", Value: []byte("2")},
		{Bucket: "b", Key: "last", Value: []byte("old")},
		{Bucket: "a", Key: "a", Value: []byte("a")},
		{Bucket: "b", Key: "last", Value: []byte("new")},
	}
	if err := s.Batch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ bucket, key, value string }{{"b", "gone", ""}, {"b", "back", "2"}, {"b", "last", "new"}, {"a", "a", "a"}, {"a", "z", "z"}} {
		v, ok := mustGet(t, s, want.bucket, want.key)
		if want.value == "" && ok || want.value != "" && string(v) != want.value {
			t.Errorf("%s/%s = %q, %v; want %q", want.bucket, want.key, v, ok, want.value)
		}
	}
	if ops[0].Key != "gone" || ops[1].Bucket != "a" {
		t.Error("Batch reordered the caller's ops")
	}
}

// BenchmarkBatchRandomKeys writes 100,000 puts of random keys into one
// transaction, as a coordinator does when many repositories changed since
// its last write (unordered, bbolt took 5.6 s for 50,000 and 111 s for
// 200,000).
func BenchmarkBatchRandomKeys(b *testing.B) {
	ctx := context.Background()
	n := benchsize.Of(100_000, 1000)
	value := make([]byte, 150)
	for b.Loop() {
		b.StopTimer()
		s, _ := openTemp(b)
		ops := make([]Op, n)
		for i := range ops {
			ops[i] = Op{Bucket: "repos", Key: fmt.Sprintf("github.com/g%x/r%d", uint32(i)*2654435761, i), Value: value}
		}
		b.StartTimer()
		if err := s.Batch(ctx, ops); err != nil {
			b.Fatalf("Batch: %v", err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "puts/s")
}
