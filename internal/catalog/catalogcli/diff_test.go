package catalogcli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

func TestDiffReadingTheChangeSaysWhatTheFullDiffSays(t *testing.T) {
	dir, ids := repo(t,
		map[string]string{
			"DEFAULTS": "owner: root\n", "a/DEFAULTS": "submit: a\n",
			"a.list": "https://github.com/a/1\nhttps://github.com/a/2\nhttps://github.com/m/m\n",
			"b.list": "https://github.com/b/1\n", "gone.list": "https://github.com/g/1\n",
			"x/x/x": "url: https://github.com/x/x\n", "keep.list": "https://github.com/k/1\n"},
		// b.list renamed into a/ (its DEFAULTS apply), m/m moved to x/m.list,
		// gone.list deleted, a line of a.list changed.
		map[string]string{"a.list": "https://github.com/a/2\nhttps://github.com/a/3\n", "x/m.list": "https://github.com/m/m\n",
			"a/b.list": "https://github.com/b/1\n"})
	for _, p := range []string{"b.list", "gone.list"} {
		if err := gittest.Git(dir, "rm", "-q", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := gittest.Git(dir, "commit", "-q", "-m", "rm"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--json"}} {
		_, fast, errOut := run(append([]string{"diff", dir, ids[0], "HEAD"}, args...)...)
		_, full, _ := run(append([]string{"diff", "--full", dir, ids[0], "HEAD"}, args...)...)
		if fast != full || errOut != "" {
			t.Errorf("diff %q:\n%s\nthe full diff:\n%s%s", args, fast, full, errOut)
		}
		if !strings.Contains(fast, "github.com/b/1") || !strings.Contains(fast, "github.com/g/1") || strings.Contains(fast, "github.com/m/m") {
			t.Errorf("diff %q does not show the change:\n%s", args, fast)
		}
	}
}

// benchDiffCatalog returns a generated catalog of n entries (1000 a file)
// and a commit on top that changes 100 entries in 10 files, under
// b.TempDir (a run leaves nothing behind).
func benchDiffCatalog(b *testing.B, n int) (dir, base, next string) {
	b.Helper()
	ctx := context.Background()
	dir = filepath.Join(b.TempDir(), "catalog")
	base, err := catalog.Generate(ctx, gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), dir, n, 1000)
	if err != nil {
		b.Fatal(err)
	}
	for f := range 10 {
		p := filepath.Join(dir, "lists", fmt.Sprintf("%05d.list", f*(n/1000)/10))
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		// 5 lines removed, 5 added.
		var add strings.Builder
		for i := range 5 {
			fmt.Fprintf(&add, "https://example.org/bench-%d/%d\n", f, i)
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines[5:], "")+add.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := gittest.Git(dir, "commit", "-q", "-a", "-m", "change 100 entries"); err != nil {
		b.Fatal(err)
	}
	out, err := gittest.Output(dir, "rev-parse", "HEAD")
	if err != nil {
		b.Fatal(err)
	}
	next = strings.TrimSpace(out)
	return dir, base, next
}

// BenchmarkDiff diffs a change of 100 entries (in 10 files) in a catalog
// of a million: reading the change only, and reading both catalogs whole
// (--full, what diff did before).
//
//	go test ./internal/catalog/catalogcli -run '^$' -bench Diff
func BenchmarkDiff(b *testing.B) {
	n := benchsize.Of(1_000_000, 10_000)
	dir, base, next := benchDiffCatalog(b, n)
	for _, mode := range []struct {
		name string
		args []string
	}{{"change", nil}, {"full", []string{"--full"}}} {
		b.Run("entries="+fmt.Sprint(n)+"/read="+mode.name, func(b *testing.B) {
			var out string
			for b.Loop() {
				var code int
				var errOut string
				if code, out, errOut = run(append([]string{"diff", dir, base, next}, mode.args...)...); code != 0 {
					b.Fatalf("exit %d: %s", code, errOut)
				}
			}
			if !strings.Contains(out, "50 added, 50 removed, 0 changed") {
				b.Fatalf("output:\n%s", out)
			}
		})
	}
}
