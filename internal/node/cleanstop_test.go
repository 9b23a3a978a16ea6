package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// crashRig is a node's data directory holding one mirror of a real
// upstream, reopened as a node's start does.
type crashRig struct {
	t         *testing.T
	up        *gittest.Upstreams
	data, url string
	key       string
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("c", []string{"main"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	r := &crashRig{t: t, up: up, data: t.TempDir(), url: up.RepoURL("c")}
	nk, _, err := repokey.Normalize(r.url, repokey.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	r.key = nk.String()
	n := r.start()
	if _, err := n.mirror.Sync(context.Background(), repokey.Key(r.key), r.url); err != nil {
		t.Fatal(err)
	}
	return r
}

// start opens the store and a node around it, and holds what it must check.
func (r *crashRig) start() *Node {
	r.t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := mirror.Open(r.data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := st.Scan(); err != nil {
		r.t.Fatal(err)
	}
	db, err := store.OpenBolt(filepath.Join(r.t.TempDir(), "node.db"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { db.Close() })
	n := &Node{log: log, clk: clock.Real{}, mirror: st, db: db, integrity: newIntegrityScan(time.Hour),
		flog: fetchlog.New(db, fetchlog.Config{}, clock.Real{}, log), maint: newMaintainer(1, 1, 7*24*time.Hour),
		owned: map[string]*owned{r.key: {url: r.url}}, digests: map[repokey.Key]string{},
		results: map[string]*fleetv1.CheckResult{}, sendNow: make(chan struct{}, 1),
		dialer: egressDialer(Config{AllowPrivate: true})}
	n.role = partial{n}
	return n
}

func TestAfterACrashTheMirrorsWrittenLastAreCheckedBeforeTheyAreServed(t *testing.T) {
	r := newCrashRig(t)
	n := r.start() // no clean stop before it
	held := n.holdUnchecked()
	if s, broken := n.integrity.brokenState(repokey.Key(r.key)); !slices.Equal(held, []repokey.Key{repokey.Key(r.key)}) || !broken || s != repostate.Unchecked {
		t.Fatalf("held %v, state %q: want the mirror written before the crash held as %q", held, s, repostate.Unchecked)
	}
	n.checkAfterCrash(context.Background(), held)
	if s, broken := n.integrity.brokenState(repokey.Key(r.key)); broken {
		t.Fatalf("a whole mirror is %q after its check, want served", s)
	}
}

func TestAfterACrashACorruptMirrorIsRepairedBeforeItIsServed(t *testing.T) {
	r := newCrashRig(t)
	n := r.start()
	// What a lost write leaves: an object file with nothing in it.
	dir := n.mirror.Path(repokey.Key(r.key))
	empty := filepath.Join(dir, "objects", "ab", "cdef0123456789abcdef0123456789abcdef01")
	if err := os.MkdirAll(filepath.Dir(empty), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	held := n.holdUnchecked()
	if s, broken := n.integrity.brokenState(repokey.Key(r.key)); !broken || s != repostate.Unchecked {
		t.Fatalf("held %v, state %q", held, s)
	}
	n.checkAfterCrash(context.Background(), held)
	if s, broken := n.integrity.brokenState(repokey.Key(r.key)); broken {
		t.Fatalf("state %q after the check, want repaired and served", s)
	}
	if _, err := os.Stat(empty); err == nil {
		t.Fatal("the mirror was served again without its repair")
	}
}

func TestAfterACleanStopNothingIsHeld(t *testing.T) {
	r := newCrashRig(t)
	n := r.start()
	if err := n.mirror.MarkCleanStop(); err != nil {
		t.Fatal(err)
	}
	n = r.start()
	if held := n.holdUnchecked(); len(held) != 0 {
		t.Fatalf("after a clean stop: held %v", held)
	}
	if s, broken := n.integrity.brokenState(repokey.Key(r.key)); broken {
		t.Fatalf("after a clean stop: state %q", s)
	}
}
