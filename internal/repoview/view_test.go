package repoview

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
	"google.golang.org/protobuf/proto"
)

// The class of the last error takes a byte of an entry, which stays 80
// bytes; a state from a coordinator of a previous version, with an error
// but no class, and a class this version does not know, show "failed"
// until the next check says more.
func TestViewKeepsTheClassOfTheLastError(t *testing.T) {
	if size := unsafe.Sizeof(Entry{}); size != 80 {
		t.Errorf("an entry takes %d bytes, want 80", size)
	}
	tab := newView(nil)
	for _, tc := range []struct {
		st   *fleetv1.RepoState
		want repostate.Class
	}{
		{&fleetv1.RepoState{Key: "h/a/over", State: "too-large", LastError: "repository too large", Class: uint32(repostate.ClassTooLarge)}, repostate.ClassTooLarge},
		{&fleetv1.RepoState{Key: "h/a/old", State: "failing", LastError: "network: git ls-remote https://h/a/old: network: connection refused"}, repostate.ClassOther},
		{&fleetv1.RepoState{Key: "h/a/newer", State: "failing", LastError: "something new", Class: 250}, repostate.ClassOther},
		{&fleetv1.RepoState{Key: "h/a/ok", State: "ok", Class: uint32(repostate.ClassTimeout)}, repostate.NoClass}, // no error, no class
	} {
		put(tab, tc.st)
		in, _ := tab.Input(repokey.Key(tc.st.GetKey()))
		if got := repostate.ClassFromWire(tab.Get(repokey.Key(tc.st.GetKey())).GetClass()); got != tc.want || in.Class != tc.want {
			t.Errorf("%s: class %q (input %q), want %q", tc.st.GetKey(), got, in.Class, tc.want)
		}
	}
}

// Every field of a RepoState comes back from the view as it went in, in
// its usual and unusual spellings.
func TestViewKeepsEveryField(t *testing.T) {
	tab := newView(nil)
	states := []*fleetv1.RepoState{
		{Key: "github.com/a/b", Url: "https://github.com/a/b", Owner: 3, Digest: "0123456789abcdef0123456789abcdef", State: "ok",
			LastCheckMs: 1e12, LastChangeMs: 9e11, Checks: 7, Fetches: 2},
		{Key: "github.com/a/c", Url: "http://GitHub.com/a/c.git", State: "failing", Digest: "d42",
			LastError: "git ls-remote http://GitHub.com/a/c.git: fatal: repository 'http://GitHub.com/a/c.git/' not found (github.com/a/c)",
			Class:     uint32(repostate.ClassNotFound), Attrs: map[string]string{"team": "x"}, FallbackUrls: []string{"https://mirror/a/c"}},
		{Key: "github.com/a/d", State: "pending", Digest: "0123456789ABCDEF0123456789ABCDEF"}, // no URL; upper-case hex
		{Key: "github.com/a/e", Url: "https://github.com/a/e", State: "gone", Checks: 1 << 40},
		{Key: "github.com/a/f", Url: "https://github.com/a/f", State: "renamed", StateSinceMs: 1e12, RenamedTo: "github.com/z/f"},
	}
	for _, st := range states {
		put(tab, st)
	}
	for _, st := range states {
		got := tab.Get(repokey.Key(st.GetKey()))
		want := proto.Clone(st).(*fleetv1.RepoState)
		if want.Checks > 1<<32-1 {
			want.Checks = 1<<32 - 1 // counters saturate
		}
		if !proto.Equal(got, want) {
			t.Errorf("got  %v\nwant %v", got, want)
		}
	}
	if tab.Get("github.com/a/none") != nil || tab.Has("github.com/a/none") {
		t.Error("an unknown key has a state")
	}
	if _, ok := tab.Del("github.com/a/b"); !ok || tab.Has("github.com/a/b") || tab.Len() != 4 {
		t.Error("del did not remove the key")
	}
}

// The view keeps a fleet in a fraction of the memory of the RepoStates it
// was sent: the figure is the live heap after a collection, which does
// not depend on the machine's speed.
func TestViewIsAFractionOfTheMessages(t *testing.T) {
	const n = 50_000
	states := func() []*fleetv1.RepoState {
		out := make([]*fleetv1.RepoState, n)
		for i := range out {
			key := repokey.Key(fmt.Sprintf("github.com/group-%04d/repo-%07d", i%1000, i))
			url := "https://" + string(key)
			out[i] = &fleetv1.RepoState{Key: string(key), Url: url, Owner: uint32(1 + i%5), State: []string{"ok", "failing", "pending"}[i%3],
				Digest: fmt.Sprintf("%032x", i), LastCheckMs: 1e12 + int64(i), LastChangeMs: 1e12, Checks: 10, Fetches: 1,
				LastError: "git ls-remote " + url + ": network: fatal: unable to access '" + url + "/': CONNECT tunnel failed, response 502"}
		}
		return out
	}
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := live()
	msgs := map[repokey.Key]*fleetv1.RepoState{}
	for _, st := range states() {
		msgs[repokey.Key(st.GetKey())] = proto.Clone(st).(*fleetv1.RepoState)
	}
	asMessages := live() - base
	runtime.KeepAlive(msgs)
	msgs = nil
	base = live()
	tab := newView(nil)
	for _, st := range states() {
		put(tab, st)
	}
	asView := live() - base
	runtime.KeepAlive(tab)
	t.Logf("%d repositories: %d bytes each as messages, %d in the view", n, asMessages/n, asView/n)
	if asView*2 > asMessages {
		t.Fatalf("the view takes %d bytes a repository, the messages %d: want at most half", asView/n, asMessages/n)
	}
}

// The view and the classes share one slot a key: a slot is freed only
// when both have let the key go, and a freed slot is reused.
func TestViewAndClassesShareASlotAKey(t *testing.T) {
	tab := newRepoTable()
	view, classes := newView(tab), newClassTable(tab)
	for i := range 10 {
		key := repokey.Key(fmt.Sprintf("h/g/r%d", i))
		put(view, &fleetv1.RepoState{Key: string(key), State: "ok", Owner: 2})
		classes.put(key, Class{State: repostate.OK, Owner: 2, Verified: neverVerified})
	}
	if len(tab.index) != 10 || view.Len() != 10 || classes.n != 10 {
		t.Fatalf("%d slots for 10 keys (view %d, classes %d)", len(tab.index), view.Len(), classes.n)
	}
	view.Del("h/g/r3") // the view first, then its reclass
	if cl, ok := classes.get("h/g/r3"); !ok || cl.State != repostate.OK {
		t.Fatal("the class went with the view")
	}
	classes.del("h/g/r3")
	if tab.lookup("h/g/r3") != nil || len(tab.free) != 1 {
		t.Fatal("a key neither viewed nor classed keeps its slot")
	}
	classes.del("h/g/r4") // a class dropped, the view kept
	if st := view.Get("h/g/r4"); st == nil || st.GetOwner() != 2 {
		t.Fatal("the view went with the class")
	}
	put(view, &fleetv1.RepoState{Key: "h/g/new", State: "pending"})
	if len(tab.free) != 0 || len(tab.chunks) != 1 || len(tab.chunks[0]) != 10 {
		t.Fatal("a new key did not reuse the freed slot")
	}
	if st := view.Get("h/g/new"); st.GetState() != "pending" || st.GetOwner() != 0 {
		t.Fatalf("the reused slot kept what its last key had: %v", st)
	}
	if _, ok := classes.get("h/g/new"); ok {
		t.Fatal("the reused slot kept a class")
	}
	var keys []repokey.Key
	for k := range view.Keys() {
		keys = append(keys, k)
	}
	if len(keys) != 10 {
		t.Fatalf("the view yields %d keys, want 10", len(keys))
	}
}

// A repository's replica set comes back as it was sent, and repositories
// with the same set share one copy of it.
func TestViewKeepsReplicaSets(t *testing.T) {
	v, _ := New()
	put(v, &fleetv1.RepoState{Key: "example.com/a", Replicas: []uint32{3, 1}})
	put(v, &fleetv1.RepoState{Key: "example.com/b", Replicas: []uint32{3, 1}})
	put(v, &fleetv1.RepoState{Key: "example.com/c", Replicas: []uint32{1, 3}})
	put(v, &fleetv1.RepoState{Key: "example.com/d"})
	for key, want := range map[repokey.Key][]uint32{"example.com/a": {3, 1}, "example.com/b": {3, 1}, "example.com/c": {1, 3}, "example.com/d": nil} {
		if got := v.Get(key).GetReplicas(); !slices.Equal(got, want) {
			t.Errorf("%s: replicas %v, want %v", key, got, want)
		}
	}
	if got := len(v.sets.sets) - 1; got != 2 {
		t.Errorf("the view keeps %d replica sets, want 2", got)
	}
	put(v, &fleetv1.RepoState{Key: "example.com/a", Replicas: []uint32{2}})
	if got := v.Get("example.com/a").GetReplicas(); !slices.Equal(got, []uint32{2}) {
		t.Errorf("after an update: replicas %v, want [2]", got)
	}
}
