package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/store"
)

// commitFiles writes files (path -> content; "" removes the file) into the
// catalog repository dir and commits them.
func commitFiles(t *testing.T, dir, msg string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if content == "" {
			if err := gittest.Git(dir, "rm", "-q", "--", name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := gittest.Git(dir, "add", "--", name); err != nil {
			t.Fatal(err)
		}
	}
	if err := gittest.Git(dir, "commit", "-q", "-m", msg); err != nil {
		t.Fatal(err)
	}
}

// purgeFixture opens coordinators over one data directory and catalog, as
// an operator restarts one with other flags.
type purgeFixture struct {
	t             *testing.T
	dir, catDir   string
	maxPurgeShare float64
	clk           *clock.Fake
}

func newPurgeFixture(t *testing.T, share float64) *purgeFixture {
	catDir := t.TempDir()
	if err := gittest.Git(catDir, "init", "-q", "-b", "main"); err != nil {
		t.Fatal(err)
	}
	return &purgeFixture{t: t, dir: t.TempDir(), catDir: catDir, maxPurgeShare: share, clk: clock.NewFake(time.Unix(1.7e9, 0))}
}

// open starts a coordinator, with --allow-private-upstreams or without.
func (f *purgeFixture) open(allowPrivate bool) *Coordinator {
	f.t.Helper()
	db, err := store.OpenBolt(filepath.Join(f.dir, "state.db"))
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := New(context.Background(), Config{DataDir: f.dir, Catalog: f.catDir, JoinToken: testJoin, FullToken: testFull,
		Store: db, AllowPrivate: allowPrivate, MaxPurgeShare: f.maxPurgeShare}, slog.New(slog.DiscardHandler), f.clk)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// stop persists c's state and closes it.
func (f *purgeFixture) stop(c *Coordinator) {
	f.t.Helper()
	if err := c.persist(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	c.Close()
}

// urls is a list file of n URLs made with format and each index.
func urls(format string, n int) string {
	var s string
	for i := range n {
		s += fmt.Sprintf(format+"\n", i)
	}
	return s
}

// held is what purge protection holds, its keys sorted, and the catalog's
// problems.
func held(c *Coordinator) (keys []string, problems int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pendingPurge(); p != nil {
		keys = p.keys
	}
	return keys, c.problems
}

// The careless operator of issue 33: a coordinator placed four upstreams
// on a private network under --allow-private-upstreams, and restarts
// without it. The four entries are now refused; they were placed, so they
// are removals past the share (4 of 44 > 5%): held, still placed under
// their last entry, and the refusals are the catalog's problems from the
// start (not only after the next catalog commit). Confirming removes them,
// and a later restart holds nothing anew.
func TestARestartThatRefusesPlacedEntriesHoldsThem(t *testing.T) {
	ctx := context.Background()
	f := newPurgeFixture(t, 0)
	commitFiles(t, f.catDir, "40 public and 4 private upstreams", map[string]string{
		"public.list":  urls("https://example.org/g/r%02d", 40),
		"private.list": urls("http://10.1.2.3/g/p%d", 4),
	})
	c := f.open(true)
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	if keys, problems := held(c); keys != nil || problems != 0 || c.engine.Len() != 44 {
		t.Fatalf("first start: held %v, %d problems, %d placed; want nothing held, 0 problems, 44 placed", keys, problems, c.engine.Len())
	}
	f.stop(c)

	c = f.open(false)
	want := []string{"10.1.2.3/g/p0", "10.1.2.3/g/p1", "10.1.2.3/g/p2", "10.1.2.3/g/p3"}
	check := func(when string) {
		t.Helper()
		keys, problems := held(c)
		if !slices.Equal(keys, want) || problems != 4 || c.engine.Len() != 44 {
			t.Fatalf("%s: held %v, %d problems, %d placed; want the 4 private ones held, 4 problems, 44 placed", when, keys, problems, c.engine.Len())
		}
		c.mu.Lock()
		e, ok := c.entry(repokey.Key(want[0]))
		c.mu.Unlock()
		if !ok || e.URL != "http://10.1.2.3/g/p0" {
			t.Fatalf("%s: a held repository's entry %+v (%v), want its last URL", when, e, ok)
		}
	}
	check("restarted without --allow-private-upstreams")
	if err := c.RefreshCatalog(ctx); err != nil { // the same commit
		t.Fatal(err)
	}
	check("after a catalog fetch")
	if _, err := c.confirmPurge(ctx); err != nil {
		t.Fatal(err)
	}
	if keys, problems := held(c); keys != nil || problems != 4 || c.engine.Len() != 40 {
		t.Fatalf("confirmed: held %v, %d problems, %d placed; want nothing held, 4 problems, 40 placed", keys, problems, c.engine.Len())
	}
	f.stop(c)

	c = f.open(false)
	defer c.Close()
	if keys, problems := held(c); keys != nil || problems != 4 || c.engine.Len() != 40 {
		t.Fatalf("restarted after the confirmation: held %v, %d problems, %d placed; want nothing held anew", keys, problems, c.engine.Len())
	}
}

// Restarting with the policy that placed them again lifts the hold: the
// entries are listed and accepted again.
func TestARestartUnderTheOldPolicyLiftsTheHold(t *testing.T) {
	ctx := context.Background()
	f := newPurgeFixture(t, 0)
	commitFiles(t, f.catDir, "40 public and 4 private upstreams", map[string]string{
		"public.list":  urls("https://example.org/g/r%02d", 40),
		"private.list": urls("http://10.1.2.3/g/p%d", 4),
	})
	c := f.open(true)
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	f.stop(c)
	c = f.open(false)
	if keys, _ := held(c); len(keys) != 4 {
		t.Fatalf("held %v, want 4", keys)
	}
	f.stop(c)
	c = f.open(true)
	defer c.Close()
	if keys, problems := held(c); keys != nil || problems != 0 || c.engine.Len() != 44 {
		t.Fatalf("back under the old policy: held %v, %d problems, %d placed; want nothing held, 44 placed", keys, problems, c.engine.Len())
	}
}

// Every way a repository leaves what is served counts against one share
// (10% of about 40 within the window): a removal from the catalog and an
// entry made unparsable each pass alone, and so would the two entries a
// restart refuses; together they are too many, and those last two are
// held.
func TestRemovalsUnparsableAndRefusedEntriesCountTogether(t *testing.T) {
	ctx := context.Background()
	f := newPurgeFixture(t, 0.1)
	commitFiles(t, f.catDir, "37 public, 1 in YAML, 2 private", map[string]string{
		"public.list":  urls("https://example.org/g/r%02d", 37),
		"one.yaml":     "url: https://example.org/g/yaml\n",
		"private.list": urls("http://10.1.2.3/g/p%d", 2),
	})
	c := f.open(true)
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, f.catDir, "remove r00", map[string]string{"public.list": urls("https://example.org/g/r%02d", 37)[len("https://example.org/g/r00\n"):]})
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, f.catDir, "break one.yaml", map[string]string{"one.yaml": "url: [https://example.org/g/yaml\n"})
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	keys, problems := held(c)
	if keys != nil || problems != 1 || c.engine.Len() != 38 {
		t.Fatalf("after a removal and an unparsable entry: held %v, %d problems, %d placed; want both applied (38 placed), 1 problem", keys, problems, c.engine.Len())
	}
	c.mu.Lock()
	counted := c.removals.count(f.clk.Now(), c.cfg.PurgeWindow)
	c.mu.Unlock()
	if counted != 2 {
		t.Fatalf("%d removals counted in the window, want 2 (the removal and the unparsable entry)", counted)
	}
	f.stop(c)

	c = f.open(false)
	defer c.Close()
	keys, problems = held(c)
	if !slices.Equal(keys, []string{"10.1.2.3/g/p0", "10.1.2.3/g/p1"}) || problems != 3 || c.engine.Len() != 38 {
		t.Fatalf("restarted refusing 2 more: held %v, %d problems, %d placed; want the 2 refused held, 3 problems, 38 placed", keys, problems, c.engine.Len())
	}
}

// A restart shows the catalog's problems at once, as the run before it did,
// not 0 until the next catalog commit (issue 33), and holds nothing.
func TestARestartShowsTheCatalogsProblemsAtOnce(t *testing.T) {
	ctx := context.Background()
	f := newPurgeFixture(t, 0)
	commitFiles(t, f.catDir, "40 upstreams and 2 bad lines", map[string]string{
		"public.list": urls("https://example.org/g/r%02d", 40) + "not a url\nftp://example.org/x.git\n",
	})
	c := f.open(false)
	if err := c.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	f.stop(c)
	c = f.open(false)
	defer c.Close()
	c.mu.Lock()
	lines := c.problemLines
	c.mu.Unlock()
	if keys, problems := held(c); keys != nil || problems != 2 || len(lines) != 2 || c.engine.Len() != 40 {
		t.Fatalf("restarted: held %v, %d problems %q, %d placed; want nothing held, the 2 problems, 40 placed", keys, problems, lines, c.engine.Len())
	}
}
