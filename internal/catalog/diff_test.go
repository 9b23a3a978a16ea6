package catalog

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
)

// loadThenUpdate is the Delta Diff must give: the old catalog loaded whole,
// then updated.
func loadThenUpdate(t *testing.T, gitDir, oldRev, newRev string) Delta {
	t.Helper()
	old, err := Load(context.Background(), testGit, gitDir, oldRev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, d, err := old.Update(context.Background(), testGit, gitDir, newRev)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDiffGivesTheDeltaOfAFullLoadThenUpdate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, next map[string]string
		whole      bool
	}{
		{name: "plain add, remove and change",
			base: map[string]string{"a.list": "https://github.com/a/1\nhttps://github.com/a/2\n", "b.list": "https://github.com/b/1\n", "x/x/x": "url: https://github.com/x/x\nowner: a\n"},
			next: map[string]string{"a.list": "https://github.com/a/2\nhttps://github.com/a/3\n", "x/x/x": "url: https://github.com/x/x\nowner: b\n"}},
		{name: "a key removed from a changed file is still listed by an unchanged one",
			base: map[string]string{"a.list": "https://github.com/d/dup\n", "b.list": "https://GitHub.com/D/Dup.git\n"},
			next: map[string]string{"a.list": "https://github.com/a/1\n"}},
		{name: "a key added to a changed file that an earlier unchanged file lists",
			base: map[string]string{"a.list": "https://github.com/d/dup\n", "b.list": "https://github.com/b/1\n"},
			next: map[string]string{"b.list": "https://github.com/b/1\nhttps://github.com/d/dup.git\n"}},
		{name: "a key added to an earlier file than the unchanged one that lists it",
			base: map[string]string{"b.list": "https://github.com/d/dup\n", "c.list": "https://github.com/c/1\n"},
			next: map[string]string{"a.list": "https://github.com/d/dup.git\n"}},
		{name: "an unchanged file spells the key with percent escapes",
			base: map[string]string{"a.list": "https://github.com/d/dup\n", "b.list": "https://github.com/d/%64up\n"},
			next: map[string]string{"a.list": deleted}},
		{name: "an unchanged YAML entry spells the key with an escape",
			base: map[string]string{"a.list": "https://github.com/d/dup\n", "y/d/dup": "url: \"https://github.com/d/\\x64up\"\n"},
			next: map[string]string{"a.list": deleted}},
		{name: "an unchanged YAML entry lists the key",
			base: map[string]string{"a.list": "https://github.com/d/dup\n", "y/d/dup": "---\nurl:\n- https://github.com/d/dup\nowner: z\n"},
			next: map[string]string{"a.list": "https://github.com/n/1\n"}},
		{name: "a DEFAULTS change loads the old catalog whole",
			base: map[string]string{"y/DEFAULTS": "owner: a\n", "y/x/x": "url: https://github.com/x/x\n", "z.list": "https://github.com/z/z\n"},
			next: map[string]string{"y/DEFAULTS": "owner: b\n"}, whole: true},
		{name: "a DEFAULTS above an unchanged file applies to it",
			base: map[string]string{"y/DEFAULTS": "owner: a\n", "y/a.list": "https://github.com/d/dup\n", "z.list": "https://github.com/d/dup\n"},
			next: map[string]string{"z.list": "https://github.com/z/z\n"}},
		{name: "nothing changed", base: map[string]string{"a.list": "https://github.com/a/1\n"}, next: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			base := r.commit(tc.base)
			next := base
			if len(tc.next) > 0 {
				next = r.commit(tc.next)
			}
			want := loadThenUpdate(t, r.gitDir(), base, next)
			got, err := Diff(context.Background(), testGit, r.gitDir(), base, next, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Delta, want) {
				t.Errorf("Diff:\n%+v\nLoad then Update:\n%+v", got.Delta, want)
			}
			if got.Old != base || got.New != next || got.Whole != tc.whole {
				t.Errorf("old %s new %s whole %v", got.Old, got.New, got.Whole)
			}
		})
	}
}

func TestDiffOfOneChangedFileReadsOnlyThatFile(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cat")
	const n, perFile = 20000, 1000
	base, err := Generate(ctx, testGit, dir, n, perFile)
	if err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(dir, ".git")
	// File 3 loses its first 5 entries and gains 5 new ones; on "dup", one
	// of them is one that file 7 (unchanged) lists, so file 7 is read too.
	for _, tc := range []struct {
		ref   string
		dup   bool
		reads int
	}{
		// The old version of file 3, and its new version twice (once to
		// know its keys, once by Update).
		{"refs/heads/plain", false, 3},
		// Then file 7 and file 3's old version once more.
		{"refs/heads/dup", true, 5},
	} {
		err = fastImport(ctx, testGit, gitDir, func(w *bufio.Writer) {
			content := appendGenList(nil, 3*perFile+5, perFile-5)
			for j := range 4 {
				content = append(appendGenURL(content, n+j), '\n')
			}
			if tc.dup {
				content = append(appendGenURL(content, 7*perFile+10), '\n')
			} else {
				content = append(appendGenURL(content, n+4), '\n')
			}
			fmt.Fprintf(w, "commit %s\ncommitter %s\ndata 7\nchange\nfrom %s\n", tc.ref, genIdentity, base)
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", genPath(3), len(content), content)
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Diff(ctx, testGit, gitDir, base, tc.ref, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if want := loadThenUpdate(t, gitDir, base, tc.ref); !reflect.DeepEqual(got.Delta, want) {
			t.Fatalf("%s: Diff:\n%+v\nLoad then Update:\n%+v", tc.ref, got.Delta, want)
		}
		added := 5
		if tc.dup {
			added = 4
		}
		if len(got.Delta.Added) != added || len(got.Delta.Removed) != 5 || len(got.Delta.Changed) != 0 {
			t.Errorf("%s: %d added, %d removed, %d changed; want %d, 5, 0", tc.ref, len(got.Delta.Added), len(got.Delta.Removed), len(got.Delta.Changed), added)
		}
		if got.Whole || got.FilesRead != tc.reads {
			t.Errorf("%s: read %d blobs (whole: %v), want %d of the %d files", tc.ref, got.FilesRead, got.Whole, tc.reads, n/perFile)
		}
	}
}
