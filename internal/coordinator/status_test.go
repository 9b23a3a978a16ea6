package coordinator

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/intern"
	"github.com/gitfleet/gitfleet/internal/repostate"
)

func TestStatusKeepsWhatNodesReport(t *testing.T) {
	if size := unsafe.Sizeof(repoStatus{}); size != 88 {
		t.Errorf("a status takes %d bytes, want 88", size)
	}
	digest := gitcmd.Refs{Refs: map[string]string{"refs/heads/main": strings.Repeat("a", 40)}}.Digest()
	var s repoStatus
	if !s.setDigest(digest) || s.Digest() != digest {
		t.Fatalf("digest %q came back as %q", digest, s.Digest())
	}
	for _, bad := range []string{"xyz", strings.ToUpper(digest), digest + "00", digest[:31] + "g", strings.Repeat("é", 16)} {
		if s.setDigest(bad) || s.Digest() != digest {
			t.Errorf("malformed digest %q accepted or clobbered the last one (now %q)", bad, s.Digest())
		}
	}
	if !s.setDigest("") || s.Digest() != "" {
		t.Error("an empty digest (no refs) is not recorded")
	}

	s.setError(strings.Repeat("é", maxErrorLen), nil, "")
	if len(s.lastError) > maxErrorLen+3 || !strings.HasSuffix(s.lastError, "...") || !utf8Valid(s.lastError) {
		t.Errorf("a long error is kept as %d bytes", len(s.lastError))
	}

	if n := add16(1<<16 - 2); n != 1<<16-1 || add16(n) != n {
		t.Error("add16 does not stop at its largest value")
	}
	if n := add32(1<<32 - 1); n != 1<<32-1 {
		t.Error("add32 wraps")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func TestStatusRecordRoundTrip(t *testing.T) {
	digest := gitcmd.Refs{Refs: map[string]string{"refs/tags/v1": strings.Repeat("b", 40)}}.Digest()
	in := repoStatus{lastCheck: 1_700_000_000_000, lastChange: 1_600_000_000_000, lastError: "timeout: upstream slow",
		class: repostate.ClassTimeout, checks: 12, fetches: 3, failures: 2, notFound: 1, state: repostate.Gone, lastDuration: packMs(4321)}
	in.setDigest(digest)
	b, err := json.Marshal(in.record("h/a/b"))
	if err != nil {
		t.Fatal(err)
	}
	var rec statusRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if out := rec.status(nil, "h/a/b"); out != in {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
	// A record written before statuses were compact, or by hand: states by
	// name, counts clamped, a bad digest dropped.
	old := `{"Digest":"not-a-digest","State":"failing","LastCheck":5,"Failures":100000,"NotFound":-3,"Checks":99999999999}`
	if err := json.Unmarshal([]byte(old), &rec); err != nil {
		t.Fatal(err)
	}
	got := rec.status(nil, "h/a/b")
	if got.state != repostate.Failing || got.failures != 1<<16-1 || got.notFound != 0 || got.checks != 1<<32-1 || got.hasDigest || got.lastCheck != 5 {
		t.Fatalf("old record read as %+v", got)
	}
	// A failure stored by a previous version, without its class: "failed"
	// until the next check says more.
	old = `{"State":"gone","LastError":"not-found: git ls-remote https://h/a/b: not-found: Repository not found.","NotFound":5}`
	rec = statusRecord{}
	if err := json.Unmarshal([]byte(old), &rec); err != nil {
		t.Fatal(err)
	}
	if got := rec.status(nil, "h/a/b"); got.class != repostate.ClassOther || got.state != repostate.Gone || got.notFound != 5 {
		t.Fatalf("a record without a class read as %+v", got)
	}
	if parseState("nonsense") != repostate.Pending || repostate.State(200).String() != repostate.Pending.String() {
		t.Error("an unknown state is not pending")
	}
}

// BenchmarkStatusMemory reports the heap a million statuses take, with
// their keys shared with the placement engine as statusOf shares them.
func BenchmarkStatusMemory(b *testing.B) {
	n := benchsize.Of(1_000_000, 1000)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("github.com/group-%04d/repo-%07d", i/1000, i)
	}
	digest := gitcmd.Refs{Refs: map[string]string{"refs/heads/main": strings.Repeat("c", 40)}}.Digest()
	var m map[string]*repoStatus
	var held uint64
	for b.Loop() {
		m = nil
		base := heapInUse()
		m = make(map[string]*repoStatus)
		for _, k := range keys {
			s := &repoStatus{state: repostate.OK, lastCheck: 1e12, lastChange: 1e12, checks: 1, fetches: 1}
			s.setDigest(digest)
			m[k] = s
		}
		held = heapInUse() - base
	}
	b.ReportMetric(float64(held)/float64(n), "B/repo")
	runtime.KeepAlive(m)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An error that names its repository is kept as one shared text for every
// repository that fails the same way, and is stored and read back whole.
func TestStatusErrorsShareOneTextAndAreStoredWhole(t *testing.T) {
	errs := intern.New(100)
	msg := func(key string) string {
		return "network: git ls-remote https://" + key + ": fatal: unable to access 'https://" + key + "/': Connection refused"
	}
	var a, b repoStatus
	a.setError(msg("h/g/a"), errs, "h/g/a")
	b.setError(msg("h/g/b"), errs, "h/g/b")
	if a.lastError != b.lastError || errs.Len() != 1 {
		t.Fatalf("two repositories' errors are kept apart (%d texts)", errs.Len())
	}
	if a.errorText("h/g/a") != msg("h/g/a") || b.errorText("h/g/b") != msg("h/g/b") {
		t.Fatalf("read back as %q and %q", a.errorText("h/g/a"), b.errorText("h/g/b"))
	}
	rec := a.record("h/g/a")
	if rec.LastError != msg("h/g/a") {
		t.Fatalf("stored as %q", rec.LastError)
	}
	if got := rec.status(errs, "h/g/a"); got.errorText("h/g/a") != msg("h/g/a") || got.lastError != a.lastError {
		t.Fatalf("restored as %q", got.errorText("h/g/a"))
	}
}
