package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/config"
)

func TestSourceFetchesTheRemoteDefaultBranch(t *testing.T) {
	ctx := context.Background()
	up := newTestRepo(t)
	first := up.commit(map[string]string{"a.list": "https://github.com/a/1\n"})
	s, err := OpenSource(t.TempDir(), up.dir, testGit, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Fetch(ctx)
	if err != nil || got != first {
		t.Fatalf("Fetch = %s, %v; want %s", got, err, first)
	}
	c, err := Load(ctx, testGit, s.Dir(), got, Options{})
	if err != nil || c.Len() != 1 {
		t.Fatalf("Load from the clone: %v, %d entries", err, c.Len())
	}
	second := up.commit(map[string]string{"a.list": "https://github.com/a/1\nhttps://github.com/a/2\n"})
	if got, err = s.Fetch(ctx); err != nil || got != second {
		t.Fatalf("second Fetch = %s, %v; want %s", got, err, second)
	}
	if _, d, err := c.Update(ctx, testGit, s.Dir(), got); err != nil || len(d.Added) != 1 {
		t.Errorf("Update in the clone: %v, %+v", err, d)
	}
}

func TestSourceFetchFailureKeepsThePreviousClone(t *testing.T) {
	ctx := context.Background()
	up := newTestRepo(t)
	first := up.commit(map[string]string{"a.list": "https://github.com/a/1\n"})
	data := t.TempDir()
	s, err := OpenSource(data, up.dir, testGit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(up.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(ctx); err == nil {
		t.Fatal("Fetch of a vanished remote should fail")
	}
	// The clone still has the last good commit, also after a restart.
	s2, err := OpenSource(data, up.dir, testGit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Load(ctx, testGit, s2.Dir(), headRef, Options{}); err != nil || c.Commit() != first || c.Len() != 1 {
		t.Errorf("after a failed fetch: %v, %+v", err, c)
	}
}

func TestOpenSourceRefusesNoRemote(t *testing.T) {
	if _, err := OpenSource(t.TempDir(), "", testGit, nil); err == nil {
		t.Error("want an error")
	}
}

func TestOpenSourceMakesLocalPathsAbsolute(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	s, err := OpenSource("data", "../catalog", testGit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(s.remote) || filepath.Base(s.remote) != "catalog" {
		t.Errorf("remote %q", s.remote)
	}
	// git runs elsewhere (package gitcmd): the clone is made here, not there.
	if !filepath.IsAbs(s.Dir()) {
		t.Errorf("clone directory %q is relative", s.Dir())
	}
	if _, err := os.Stat(filepath.Join(cwd, "data", "catalog.git", "HEAD")); err != nil {
		t.Errorf("clone not made in the relative data directory: %v", err)
	}
	for _, u := range []string{"https://example.org/c.git", "git@example.org:c.git"} {
		if s, err := OpenSource(t.TempDir(), u, testGit, nil); err != nil || s.remote != u {
			t.Errorf("URL %q became %q (%v)", u, s.remote, err)
		}
	}
}

func TestCheckPurge(t *testing.T) {
	tests := []struct {
		name           string
		total, removed int
		share          float64
		held           bool
	}{
		{"a small removal passes", 1000, 10, config.DefaultMaxPurge, false},
		{"exactly the share passes", 1000, 50, config.DefaultMaxPurge, false},
		{"one more is held", 1000, 51, config.DefaultMaxPurge, true},
		{"removing everything is held", 1000, 1000, config.DefaultMaxPurge, true},
		{"an operator's confirmation (share 1) releases it", 1000, 1000, 1, false},
		{"an empty catalog has nothing to protect", 0, 0, config.DefaultMaxPurge, false},
		{"nothing removed passes", 10, 0, 0, false},
		{"exactly 29% of 100 passes despite float rounding", 100, 29, 0.29, false},
		{"a share of 0 holds any removal", 10, 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPurge(tt.total, tt.removed, tt.share)
			if held := errors.Is(err, ErrPurge); held != tt.held {
				t.Errorf("CheckPurge(%d, %d, %v) = %v, held %v want %v", tt.total, tt.removed, tt.share, err, held, tt.held)
			}
		})
	}
}

// CheckSource reads a catalog repository as the first fetch would, and
// says why one cannot be read.
func TestCheckSourceSaysWhyACatalogCannotBeRead(t *testing.T) {
	ctx := context.Background()
	up := newTestRepo(t)
	if _, err := CheckSource(ctx, testGit, up.dir); err == nil || !strings.Contains(err.Error(), "has no HEAD") {
		t.Errorf("a repository without a commit: err = %v, want it to say it has no HEAD", err)
	}
	first := up.commit(map[string]string{"a.list": "https://github.com/a/1\n"})
	if got, err := CheckSource(ctx, testGit, up.dir); err != nil || got != first {
		t.Errorf("a catalog: CheckSource = %s, %v; want %s", got, err, first)
	}
	notRepo := t.TempDir()
	for _, bad := range []string{filepath.Join(t.TempDir(), "no-such-catalog"), notRepo} {
		if _, err := CheckSource(ctx, testGit, bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: err = %v, want one that names it", bad, err)
		}
	}
}
