package e2e

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// firstMirror is the README's section that the newcomer's test runs.
const firstMirror = "A first real mirror in ten minutes"

// readmeAddr is the address the README's commands reach the mirror at: up's
// default --http, and ctl's default server.
const readmeAddr = "127.0.0.1:8080"

// A newcomer's path: the README's commands for a first real mirror, run as
// they are written, in the order written, from a copy of the repository's
// example catalog. Only the places change: the example's upstreams are
// served by a git server on 127.0.0.1 (there is no network here), and up
// listens on free ports. The test pushes a commit upstream before the
// README's `ctl fetch`, and after the README's pull the clone has it.
func TestTheReadmesFirstMirrorWorksAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	blocks := readmeShellBlocks(t, "../README.md", firstMirror)
	f := newFleet(t)
	upHost := strings.TrimPrefix(f.up.URL, "http://")
	work := t.TempDir()
	repos := exampleCatalogServedLocally(t, f, filepath.Join(work, "examples", "catalog"))

	// The README's commands name the upstreams' keys and the mirror's
	// address; here those are the local server's and a free port.
	hosts := map[string]bool{}
	for _, name := range repos {
		host, _, _ := strings.Cut(name, "/")
		hosts[host] = true
	}
	pairs := []string{readmeAddr, f.http}
	for host := range hosts {
		pairs = append(pairs, host+"/", upHost+"/"+host+"/")
	}
	local := strings.NewReplacer(pairs...)
	home := t.TempDir()
	env := append(gittest.Env(), "GITFLEET_SERVER="+f.base, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	run := func(line string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the README's %q (run as %q): %v\n%s", line, local.Replace(line), err, out)
		}
		return string(out)
	}

	var steps []string // what was done, to check that the README still does it all
	var pushed, fetchedKey, cloneDir string
	for i, block := range blocks {
		for _, readme := range block {
			line := local.Replace(readme)
			t.Logf("terminal %d: %s", i+1, readme)
			switch {
			case strings.HasPrefix(readme, "go build "):
				// TestMain built the binary from ../cmd/gitfleet: the same
				// build, put where the README's command puts it.
				if readme != "go build -o gitfleet ./cmd/gitfleet" {
					t.Fatalf("the README builds with %q: teach this test what it makes", readme)
				}
				if err := os.Symlink(binary, filepath.Join(work, "gitfleet")); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, "build")
			case strings.HasPrefix(readme, "./gitfleet up "):
				// exec: the shell becomes gitfleet, which the harness stops.
				// Flags given last win: up listens on free ports, and may
				// reach upstreams on 127.0.0.1.
				cmd := exec.Command("sh", "-c", "exec "+line+" --http "+f.http+" --grpc "+freeAddr(t)+
					" --tunnel "+freeAddr(t)+" --allow-private-upstreams")
				cmd.Dir, cmd.Env = work, env
				startCmd(t, "up", cmd)
				steps = append(steps, "up")
			case strings.HasPrefix(readme, "./gitfleet ctl repos"):
				// "Wait until each one's STATE is ok."
				eventually(t, 90*time.Second, "the README's ctl repos shows every repository ok", func() error {
					cmd := exec.Command("sh", "-c", line)
					cmd.Dir, cmd.Env = work, env
					out, err := cmd.CombinedOutput()
					if err != nil {
						return fmt.Errorf("%v: %s", err, out)
					}
					return everyKeyOK(string(out), f, repos)
				})
				steps = append(steps, "repos")
			case strings.HasPrefix(readme, "git clone "):
				run(line)
				cloneDir = strings.TrimSuffix(path.Base(strings.Fields(line)[len(strings.Fields(line))-1]), ".git")
				steps = append(steps, "clone")
			case strings.Contains(readme, "./gitfleet ctl fetch "):
				// A push upstream, then the README's check of it.
				name := repoNamed(t, line, repos, upHost)
				oid, err := f.up.Commit(name, "main")
				if err != nil {
					t.Fatal(err)
				}
				pushed, fetchedKey = oid, upHost+"/"+name
				t.Logf("pushed %s to %s", oid, name)
				run(line)
				// --wait returns once the mirror serves what the check found.
				served, err := lsRemote(f.base + "/" + fetchedKey + ".git")
				if err != nil {
					t.Fatal(err)
				}
				if served["refs/heads/main"] != pushed {
					t.Fatalf("after the README's ctl fetch --wait the mirror serves main at %s, the upstream has %s", served["refs/heads/main"], pushed)
				}
				steps = append(steps, "fetch")
			case strings.HasPrefix(readme, "git -C ") && strings.HasSuffix(readme, " pull"):
				run(line)
				steps = append(steps, "pull")
			default:
				run(line)
			}
		}
	}
	if want := []string{"build", "up", "repos", "clone", "fetch", "pull"}; !slices.Equal(steps, want) {
		t.Fatalf("the README's first mirror did %v; this test follows %v: build, up, wait for ok, clone, fetch after a push, pull", steps, want)
	}
	head, err := gittest.Output(filepath.Join(work, cloneDir), "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(head) != pushed {
		t.Fatalf("the clone's HEAD after the README's pull is %s; the commit pushed upstream is %s", strings.TrimSpace(head), pushed)
	}
}

// exampleCatalogServedLocally copies the repository's example catalog to
// dst with each upstream URL https://HOST/PATH.git turned into the same
// path on a git server of the test's, where it creates that repository
// (branch main, tag v1). It returns the repositories' names, HOST/PATH.
func exampleCatalogServedLocally(t *testing.T, f *fleet, dst string) []string {
	t.Helper()
	src := filepath.Join("..", "examples", "catalog")
	url := regexp.MustCompile(`https://([^/\s]+/[^\s]+)\.git`)
	var names []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := url.ReplaceAllStringFunc(string(b), func(u string) string {
			name := url.FindStringSubmatch(u)[1]
			if strings.HasPrefix(strings.ToUpper(d.Name()), "README") {
				return u // never read by gitfleet
			}
			names = append(names, name)
			if err := f.up.Create(name, []string{"main"}, []string{"v1"}); err != nil {
				t.Fatal(err)
			}
			return f.up.RepoURL(name)
		})
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, []byte(text), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 {
		t.Fatalf("examples/catalog lists %d upstreams (%v): want a few", len(names), names)
	}
	return names
}

// everyKeyOK reads `gitfleet ctl repos`'s table and says which of repos is
// missing or not ok.
func everyKeyOK(table string, f *fleet, repos []string) error {
	upHost := strings.TrimPrefix(f.up.URL, "http://")
	state := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 {
			state[fields[0]] = fields[1]
		}
	}
	var notOK []string
	for _, name := range repos {
		if key := upHost + "/" + name; state[key] != "ok" {
			notOK = append(notOK, fmt.Sprintf("%s: %q", key, state[key]))
		}
	}
	if len(notOK) > 0 {
		return fmt.Errorf("not ok: %s (the table: %v)", strings.Join(notOK, ", "), state)
	}
	return nil
}

// repoNamed is the repository of repos whose key a command line names.
func repoNamed(t *testing.T, line string, repos []string, upHost string) string {
	t.Helper()
	for _, name := range repos {
		if slices.Contains(strings.Fields(line), upHost+"/"+name) {
			return name
		}
	}
	t.Fatalf("%q names none of the example's repositories %v", line, repos)
	return ""
}

// readmeShellBlocks returns the commands of each ```sh block of a section
// of a Markdown file, a block a terminal: comments dropped, lines continued
// with a backslash joined.
func readmeShellBlocks(t *testing.T, file, section string) [][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(b), "\n## "+section+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", file, section)
	}
	text, _, _ = strings.Cut(text, "\n## ")
	var blocks [][]string
	var cur []string
	in, cont := false, ""
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		switch {
		case !in && strings.HasPrefix(line, "```sh"):
			in, cur = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, cur)
		case in:
			line = cont + strings.TrimSpace(dropShellComment(line))
			if rest, ok := strings.CutSuffix(line, `\`); ok {
				cont = rest
				continue
			}
			if cont = ""; line != "" {
				cur = append(cur, line)
			}
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s's section %q has no ```sh block", file, section)
	}
	return blocks
}

// dropShellComment cuts a shell comment (a # at the start of a word,
// outside quotes) off a line.
func dropShellComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}
