package catalogcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

// repo makes a git work tree with one commit per element of commits and
// returns its path and the commit IDs.
func repo(t *testing.T, commits ...map[string]string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	if err := gittest.Git(dir, "init", "-q", "-b", "main"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, files := range commits {
		for name, content := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := gittest.Git(dir, "add", "-A"); err != nil {
			t.Fatal(err)
		}
		if err := gittest.Git(dir, "commit", "-q", "-m", "c"); err != nil {
			t.Fatal(err)
		}
		out, err := gittest.Output(dir, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	return dir, ids
}

func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCheckReportsEveryProblemWithFileAndLineAndFailsOnErrors(t *testing.T) {
	dir, _ := repo(t, map[string]string{
		"a.list": "https://github.com/a/1\nftp://github.com/a/2\nhttps://github.com/a/1.git\n",
		"b/b/b":  "url: [https://u:p@github.com/b/b\n",
	})
	code, out, _ := run("check", dir)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"a.list:2: error: ", "a.list:3: warning: duplicate", "b/b/b:1: error: not valid YAML", dir + " at "}
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s", out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], w)
		}
	}
	if !strings.HasSuffix(lines[3], ": 1 entry, 2 errors, 1 warning") {
		t.Errorf("summary %q", lines[3])
	}
}

func TestCheckPassesWithWarningsOnly(t *testing.T) {
	dir, _ := repo(t, map[string]string{"a.list": "https://github.com/a/1\n", "b.list": "https://github.com/a/1\n"})
	if code, out, _ := run("check", dir); code != 0 || !strings.Contains(out, "0 errors, 1 warning") {
		t.Errorf("exit %d, output %q", code, out)
	}
}

func TestCheckJSONAndFlagsAnywhere(t *testing.T) {
	dir, ids := repo(t,
		map[string]string{"a.list": "https://github.com/a/1\nnot-a-url\n"},
		map[string]string{"a.list": "https://github.com/a/1\n"})
	for _, args := range [][]string{
		{"check", "--json", dir, ids[0]},
		{"check", dir, ids[0], "--json"},
		{"check", dir, "-json", ids[0]},
	} {
		code, out, errOut := run(args...)
		var r checkReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%q: %v\n%s%s", args, err, out, errOut)
		}
		if code != 1 || r.Commit != ids[0] || r.Entries != 1 || r.Errors != 1 || len(r.Problems) != 1 || r.Problems[0].Line != 2 {
			t.Errorf("%q: exit %d, report %+v", args, code, r)
		}
	}
	code, out, _ := run("check", dir, "--json")
	if code != 0 || !strings.Contains(out, `"problems": []`) {
		t.Errorf("clean HEAD: exit %d\n%s", code, out)
	}
}

func TestCheckAllowsPrivateUpstreamsOnlyWhenAsked(t *testing.T) {
	dir, _ := repo(t, map[string]string{"a.list": "http://127.0.0.1:8080/r\n"})
	if code, _, _ := run("check", dir); code != 1 {
		t.Errorf("a private upstream should be an error by default, exit %d", code)
	}
	if code, out, _ := run("check", dir, "--allow-private-upstreams"); code != 0 {
		t.Errorf("exit %d\n%s", code, out)
	}
}

func TestDiffListsTheKeysAddedRemovedAndChanged(t *testing.T) {
	dir, ids := repo(t,
		map[string]string{"a.list": "https://github.com/a/1\nhttps://github.com/a/2\nhttps://github.com/m/m\n", "x/x/x": "url: https://github.com/x/x\nowner: a\n"},
		map[string]string{"a.list": "https://github.com/a/2\nhttps://github.com/a/3\n", "b.list": "https://github.com/m/m\n", "x/x/x": "url: https://github.com/x/x\nowner: b\n"})
	code, out, errOut := run("diff", dir, ids[0], ids[1])
	want := "+ github.com/a/3\n- github.com/a/1\n~ github.com/x/x\n" + fmt.Sprintf("%.12s..%.12s: 1 added, 1 removed, 1 changed\n", ids[0], ids[1])
	if code != 0 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s%s", code, out, want, errOut)
	}
	code, out, _ = run("diff", "--json", dir, ids[0], ids[1])
	var r diffReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	if r.Old != ids[0] || r.New != ids[1] || !slices.Equal(r.Added, []string{"github.com/a/3"}) ||
		!slices.Equal(r.Removed, []string{"github.com/a/1"}) || !slices.Equal(r.Changed, []string{"github.com/x/x"}) {
		t.Errorf("report %+v", r)
	}
	if _, out, _ = run("diff", "--json", dir, ids[1], ids[1]); !strings.Contains(out, `"added": []`) {
		t.Errorf("an empty diff should list empty arrays:\n%s", out)
	}
}

func TestGenWritesACatalogThatChecksClean(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cat")
	code, out, errOut := run("gen", "--repos", "2500", "--per-file", "1000", dir)
	if code != 0 || !strings.Contains(out, "2500 entries in 3 files") {
		t.Fatalf("gen: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := run("check", dir); code != 0 || !strings.Contains(out, ": 2500 entries, 0 errors, 0 warnings") {
		t.Errorf("check of the generated catalog: exit %d\n%s", code, out)
	}
}

func TestUsageMistakes(t *testing.T) {
	notRepo := t.TempDir()
	file := filepath.Join(notRepo, "catalog.list")
	if err := os.WriteFile(file, []byte("https://github.com/a/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string // in stderr, or stdout for help
	}{
		{nil, 2, "usage:"},
		{[]string{"lint"}, 2, `unknown command "lint"`},
		{[]string{"check"}, 2, "want 1 to 2 arguments"},
		{[]string{"check", "a", "b", "c"}, 2, "want 1 to 2 arguments"},
		{[]string{"check", "--nope", notRepo}, 2, "flag provided but not defined"},
		{[]string{"check", notRepo}, 2, "is not a git repository"},
		{[]string{"check", filepath.Join(notRepo, "gone")}, 2, "gone: no such file or directory"},
		{[]string{"check", file}, 2, "is not a directory"},
		{[]string{"diff", notRepo, "a"}, 2, "want 3 arguments, got 2"},
		{[]string{"gen", notRepo}, 2, "at least one repository"},
		{[]string{"gen", "--repos", "x", notRepo}, 2, "invalid value"},
		{[]string{"check", "-h"}, 0, "usage:"},
		{[]string{"help"}, 0, "usage:"},
	}
	for _, tt := range tests {
		code, out, errOut := run(tt.args...)
		if code != tt.code || !strings.Contains(out+errOut, tt.want) {
			t.Errorf("%q: exit %d, output %q %q; want exit %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
}

// BenchmarkCheck runs `gitfleet catalog check` on a generated catalog of
// 1,000,000 entries in 1,000 files (generated under b.TempDir).
//
//	go test -run='^$' -bench=Check -benchtime=3x ./internal/catalog/catalogcli/
func BenchmarkCheck(b *testing.B) {
	n := benchsize.Of(1_000_000, 1000)
	dir := filepath.Join(b.TempDir(), "catalog")
	if _, err := catalog.Generate(context.Background(), gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), dir, n, 1000); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if code := Main(context.Background(), []string{"check", dir}, io.Discard, io.Discard); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/check")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

func TestCheckRefusesSchemesTheFleetsEgressRefuses(t *testing.T) {
	dir, _ := repo(t, map[string]string{"a.list": "https://example.com/ok\ngit://example.com/plain\nssh://git@example.com/keyed\n"})
	code, out, _ := run("check", dir)
	if code != exitProblems {
		t.Fatalf("check of git:// and ssh:// with the default egress: exit %d, want %d\n%s", code, exitProblems, out)
	}
	for _, want := range []string{`a.list:2: error: git://example.com/plain: scheme "git" is refused`, `a.list:3: error: ssh://git@example.com/keyed: scheme "ssh" is refused`, "2 errors"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := run("check", "--egress-schemes", "https,git,ssh", dir); code != exitOK {
		t.Errorf("check with --egress-schemes https,git,ssh: exit %d, want 0\n%s", code, out)
	}
	if code, _, errOut := run("check", "--egress-schemes", "ftp", dir); code != exitUsage || !strings.Contains(errOut, "--egress-schemes") {
		t.Errorf("check with --egress-schemes ftp: exit %d, want %d and the flag named\n%s", code, exitUsage, errOut)
	}
}

func TestGenRefusesARepositoryAndTakesARelativeDirectory(t *testing.T) {
	dir, _ := repo(t, map[string]string{"a.list": "https://example.com/ok\n"})
	if code, _, errOut := run("gen", "--repos", "3", dir); code != exitUsage || !strings.Contains(errOut, "already holds a git repository") {
		t.Fatalf("gen into a repository: exit %d, want %d and a clear error\n%s", code, exitUsage, errOut)
	}
	if code, _, _ := run("check", dir); code != exitOK {
		t.Fatalf("the existing catalog was harmed by a refused gen: check exits %d", code)
	}
	// git runs in a neutral directory: a relative DIR is the caller's.
	parent := t.TempDir()
	t.Chdir(parent)
	if code, out, _ := run("gen", "--repos", "3", "rel"); code != exitOK || !strings.Contains(out, "rel: 3 entries") {
		t.Fatalf("gen into a relative directory: exit %d\n%s", code, out)
	}
	if code, out, _ := run("check", "rel"); code != exitOK || !strings.Contains(out, "3 entries") {
		t.Fatalf("check of the generated relative directory: exit %d\n%s", code, out)
	}
}
