package catalog

import (
	"context"
	"slices"
	"testing"
)

// fullDiff is the reference: both catalogs loaded whole, then Update.
func fullDiff(t *testing.T, r *testRepo, oldID, newID string) Delta {
	t.Helper()
	_, d, err := r.load(oldID).Update(context.Background(), testGit, r.gitDir(), newID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDiffReadsOnlyTheChangeAndAgreesWithTheFullDiff(t *testing.T) {
	base := map[string]string{
		"DEFAULTS":       "owner: root\n",
		"a/DEFAULTS":     "submit: a\n",
		"a/b/DEFAULTS":   "branches: [main]\n",
		"a/b/x/x":        "url: https://github.com/a/x\n",
		"a/b/l.list":     "https://github.com/a/l1\nhttps://github.com/a/l2\n",
		"a/m.list":       "https://github.com/a/m1\nhttps://github.com/a/m2\nhttps://github.com/a/m3\n",
		"c.list":         "https://github.com/c/1\nhttps://github.com/c/2\n",
		"d/d.list":       "https://github.com/d/1\n",
		"e/e/e":          "url: https://github.com/e/e\nowner: me\n",
		"untouched.list": "https://github.com/u/1\nhttps://github.com/u/2\n",
	}
	tests := []struct {
		name string
		next map[string]string
		same bool // the change moves entries only
	}{
		{"a line added and one removed", map[string]string{"c.list": "https://github.com/c/2\nhttps://github.com/c/3\n"}, false},
		{"a file renamed", map[string]string{"c.list": deleted, "cc.list": "https://github.com/c/1\nhttps://github.com/c/2\n"}, true},
		{"a file renamed into a directory with DEFAULTS", map[string]string{"c.list": deleted, "a/b/c.list": "https://github.com/c/1\nhttps://github.com/c/2\n"}, false},
		{"entries moved between files", map[string]string{
			"a/m.list": "https://github.com/a/m1\n",
			"c.list":   "https://github.com/c/1\nhttps://github.com/c/2\nhttps://github.com/a/m2\n",
			"d/d.list": "https://github.com/d/1\nhttps://github.com/a/m3\n"}, false},
		{"a file deleted", map[string]string{"a/b/l.list": deleted}, false},
		{"a YAML entry changed and one moved to a .list", map[string]string{
			"e/e/e": "url: https://github.com/e/e\nowner: you\n", "a/b/x/x": deleted, "d/d.list": "https://github.com/d/1\nhttps://github.com/a/x\n"}, false},
		{"a nested DEFAULTS changed", map[string]string{"a/b/DEFAULTS": "branches: [dev]\n"}, false},
		{"an outer DEFAULTS changed", map[string]string{"a/DEFAULTS": "submit: z\n"}, false},
		{"the root DEFAULTS deleted", map[string]string{"DEFAULTS": deleted}, false},
		{"a DEFAULTS added", map[string]string{"d/DEFAULTS": "owner: d\n"}, false},
		{"a duplicate added and removed within the change", map[string]string{
			"c.list": "https://github.com/c/1\nhttps://github.com/c/2\nhttps://github.com/d/1\n", "d/d.list": deleted}, true},
		{"a file that becomes malformed", map[string]string{"e/e/e": "url: [https://github.com/e/e\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRepo(t)
			oldID := r.commit(base)
			newID := r.commit(tt.next)
			gotOld, gotNew, got, err := Diff(context.Background(), testGit, r.gitDir(), "HEAD~1", "HEAD", Options{AllowPrivate: true})
			if err != nil {
				t.Fatal(err)
			}
			if gotOld != oldID || gotNew != newID {
				t.Errorf("commits %s..%s, want %s..%s", gotOld, gotNew, oldID, newID)
			}
			want := fullDiff(t, r, oldID, newID)
			if empty := len(want.Added)+len(want.Removed)+len(want.Changed) == 0; empty != tt.same {
				t.Fatalf("the full diff is %+v: the case does not test what it says", want)
			}
			for _, k := range []struct {
				kind      string
				got, want []Entry
			}{{"added", got.Added, want.Added}, {"removed", got.Removed, want.Removed}, {"changed", got.Changed, want.Changed}} {
				if !slices.Equal(keysOf(k.got), keysOf(k.want)) {
					t.Errorf("%s %q, the full diff says %q", k.kind, keysOf(k.got), keysOf(k.want))
				}
				for i := range min(len(k.got), len(k.want)) {
					g, w := k.got[i], k.want[i]
					if g.URL != w.URL || g.File != w.File || g.Line != w.Line || !slices.Equal(sortedAttrs(g.Attrs), sortedAttrs(w.Attrs)) {
						t.Errorf("%s entry %+v, the full diff has %+v", k.kind, g, w)
					}
				}
			}
		})
	}
}

func TestDiffOfACommitWithItselfIsEmpty(t *testing.T) {
	r := newTestRepo(t)
	r.commit(map[string]string{"a.list": "https://github.com/a/1\n"})
	_, _, d, err := Diff(context.Background(), testGit, r.gitDir(), "HEAD", "main", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Added)+len(d.Removed)+len(d.Changed) != 0 {
		t.Errorf("delta %+v, want none", d)
	}
}

// A key also listed in a file that the change did not touch is seen as the
// changed files list it: the documented difference from the full diff.
func TestDiffSeesAKeyAsTheChangedFilesListIt(t *testing.T) {
	r := newTestRepo(t)
	r.commit(map[string]string{"a.list": "https://github.com/x/y\n"})
	r.commit(map[string]string{"b.list": "git://github.com/x/y\n"})
	_, _, d, err := Diff(context.Background(), testGit, r.gitDir(), "HEAD~1", "HEAD", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(d.Added); !slices.Equal(got, []string{"github.com/x/y"}) {
		t.Errorf("added %q, want the key that b.list adds", got)
	}
}

func sortedAttrs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
