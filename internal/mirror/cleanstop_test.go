package mirror_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

func TestAStoreOpenedAfterAnUncleanStopNamesTheMirrorsWrittenShortlyBeforeIt(t *testing.T) {
	up, _ := setup(t)
	for _, name := range []string{"recent", "old"} {
		if err := up.Create(name, []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *mirror.Store {
		t.Helper()
		st, err := mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Scan(); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	recent, old := keyOf(t, up.RepoURL("recent")), keyOf(t, up.RepoURL("old"))
	for _, name := range []string{"recent", "old"} {
		if _, err := st.Sync(context.Background(), keyOf(t, up.RepoURL(name)), up.RepoURL(name)); err != nil {
			t.Fatal(err)
		}
	}
	// "old" was last written an hour before "recent".
	long := time.Now().Add(-time.Hour)
	_ = filepath.WalkDir(st.Path(old), func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			err = os.Chtimes(p, long, long)
		}
		return err
	})

	// A crash: the store is opened again without a clean stop.
	st = open()
	if st.CleanStart() {
		t.Fatal("a start after a crash taken for a clean one")
	}
	if got := st.Unchecked(); !slices.Equal(got, []repokey.Key{recent}) {
		t.Fatalf("unchecked after an unclean stop: %v, want only %s", got, recent)
	}

	// A clean stop: nothing to check at the next start.
	if err := st.MarkCleanStop(); err != nil {
		t.Fatal(err)
	}
	st = open()
	if !st.CleanStart() || len(st.Unchecked()) != 0 {
		t.Fatalf("after a clean stop: clean %v, unchecked %v", st.CleanStart(), st.Unchecked())
	}
	// The marker was used up: a crash now is an unclean stop again.
	st = open()
	if st.CleanStart() || !slices.Equal(st.Unchecked(), []repokey.Key{recent}) {
		t.Fatalf("a second start without a clean stop: clean %v, unchecked %v", st.CleanStart(), st.Unchecked())
	}
}

// What a killed process left in the store's TempDir (a fetch's curl
// trace, which may name an upstream's headers) is gone after Open.
func TestOpenEmptiesTheTempDirAKillLeft(t *testing.T) {
	data := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
	if err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(mirror.TempDir(data), "gitfleet-curl-trace-123")
	if err := os.WriteFile(left, []byte("<= Recv header: Retry-After: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = mirror.Open(data, gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), log)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("%s after Open: %v, want it gone", left, err)
	}
}
