package gitserve_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// oddRepos makes, under root, bare repositories whose refs are odd in the
// ways that upload-pack's advertisement shows, and returns their names.
func oddRepos(t *testing.T, root string) []string {
	t.Helper()
	sh := func(dir, script string) {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = dir
		cmd.Env = gittest.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	sh(work, `git init -q -b main .
		echo a >a; git add a; git commit -qm a
		echo b >b; git add b; git commit -qm b
		git branch dev HEAD~1
		git tag light
		git tag -a -m one t1
		git -c advice.nestedTag=false tag -a -m two t2 t1
		git -c advice.nestedTag=false tag -a -m three t3 t2
		git tag -a -m tree ttree HEAD^{tree}
		git tag -a -m blob tblob HEAD:a`)
	repos := map[string]string{
		// An empty repository: HEAD unborn, no refs.
		"empty": `git init -q --bare -b main .`,
		// HEAD detached at a commit.
		"detached": `git clone -q --bare ../work . && git update-ref --no-deref HEAD refs/heads/dev`,
		// HEAD on a branch that does not exist, the rest packed.
		"missinghead": `git clone -q --bare ../work . && git pack-refs --all && git symbolic-ref HEAD refs/heads/gone`,
		// Tags of tags, of a tree and of a blob: loose refs, objects loose.
		"tagsloose": `git init -q --bare -b main . && git -C ../work push -q "$PWD" 'refs/*:refs/*'`,
		// The same packed, refs and objects, with one ref moved since.
		"tagspacked": `git clone -q --mirror ../work . && git repack -q -adf && git pack-refs --all &&
			git update-ref refs/tags/t1 refs/tags/t3 && git update-ref refs/gitfleet/tomb/x main && git update-ref refs/archive/1700000000/refs/heads/old main`,
		// Refs with unusual but valid names.
		"names": `git clone -q --bare ../work . && for n in a-b a/b a+b x.y with@sign A 'ünï' 'a,b' '(p)' "it's" '{b}' '!'; do
				git update-ref "refs/heads/$n" main; done &&
			git update-ref refs/pull/1/head dev && git update-ref refs/notes/commits dev && git update-ref refs/tags/v1.0-rc1 t2 &&
			git pack-refs --all && git update-ref refs/heads/a.b dev && git update-ref 'refs/heads/z~' main 2>/dev/null || true`,
		// Symbolic refs other than HEAD: to a branch, to a symbolic ref,
		// to a tag, to nothing.
		"symrefs": `git clone -q --bare ../work . && git symbolic-ref refs/heads/alias refs/heads/main &&
			git symbolic-ref refs/heads/alias2 refs/heads/alias && git symbolic-ref refs/remotes/origin/HEAD refs/heads/dev &&
			git symbolic-ref refs/tags/latest refs/tags/t3 && git symbolic-ref refs/heads/dangling refs/heads/gone`,
		// A ref whose object is missing, which git leaves out.
		"missingobject": `git clone -q --bare ../work . && echo 1234567890123456789012345678901234567890 >refs/heads/lost`,
		// Many refs, packed and loose, some loose ones over packed ones.
		"many": `git clone -q --bare ../work . && c=$(git rev-parse main) && d=$(git rev-parse dev) && t=$(git rev-parse t1) &&
			seq 1500 | awk -v c=$c -v t=$t '{print "create refs/heads/b" $1 " " c; print "create refs/tags/x" $1 " " t}' | git update-ref --stdin &&
			git pack-refs --all &&
			seq 1500 | awk -v c=$c -v d=$d '$1 % 3 == 0 {print "update refs/heads/b" $1 " " d} {print "create refs/heads/l" $1 " " c}' | git update-ref --stdin`,
		// A fork whose objects are in its pool's (alternates).
		"fork": `git init -q --bare -b main . && echo "$(cd ../tagspacked && pwd)/objects" >objects/info/alternates &&
			git fetch -q ../tagspacked 'refs/heads/*:refs/heads/*' 'refs/tags/*:refs/tags/*'`,
	}
	var names []string
	for name := range repos {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	// The fork's pool first.
	for _, name := range []string{"empty", "detached", "missinghead", "tagsloose", "tagspacked", "names", "symrefs", "missingobject", "many", "fork"} {
		sh(filepath.Join(root, name), repos[name])
	}
	return names
}

// servedConfig is what the Handler tells upload-pack (gitserve.go).
var servedConfig = []string{"-c", "uploadpack.allowFilter=true", "-c", "uploadpack.allowAnySHA1InWant=false",
	"-c", "uploadpack.hideRefs=refs/gitfleet/", "-c", "uploadpack.hideRefs=refs/archive/",
	"-c", "uploadpack.allowReachableSHA1InWant=true", "-c", "transfer.advertiseObjectInfo=false"}

// gitAnswer is git's own answer: upload-pack run on dir with the request
// body (nil: the advertisement).
func gitAnswer(t *testing.T, dir, gitProtocol string, body []byte) string {
	t.Helper()
	args := append(append([]string{}, servedConfig...), "upload-pack", "--stateless-rpc")
	if body == nil {
		args = append(args, "--advertise-refs")
	}
	cmd := exec.Command("git", append(args, dir)...)
	cmd.Env = gittest.Env()
	if gitProtocol != "" {
		cmd.Env = append(cmd.Env, "GIT_PROTOCOL="+gitProtocol)
	}
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git upload-pack in %s: %v", dir, err)
	}
	return string(out)
}

// servedV2Caps drops from git's v2 capabilities the lines that the
// Handler does not advertise (servedCapability).
func servedV2Caps(s string) string {
	var out strings.Builder
	for rest := s; len(rest) >= 4; {
		var n int
		fmt.Sscanf(rest[:4], "%04x", &n)
		if n < 4 {
			out.WriteString(rest[:4])
			rest = rest[4:]
			continue
		}
		line := rest[:n]
		if name, _, _ := strings.Cut(strings.TrimSpace(line[4:]), "="); name != "object-info" && name != "bundle-uri" {
			out.WriteString(line)
		}
		rest = rest[n:]
	}
	return out.String()
}

func lsRefsAsked(args ...string) []byte {
	s := pkt("command=ls-refs\n") + pkt("agent=git/2.39.5\n") + pkt("object-format=sha1\n") + "0001"
	for _, a := range args {
		s += pkt(a + "\n")
	}
	return []byte(s + "0000")
}

// The refs advertisement (v0, v1), the v2 capabilities and the ls-refs
// listings are written without git, byte for byte as git writes them, for
// repositories with odd refs; git runs only to read its capabilities, once.
func TestAdvertisementsAndListingsWithoutGitAreGitsOwnByteForByte(t *testing.T) {
	root := t.TempDir()
	names := oddRepos(t, root)
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), Resolve: func(key repokey.Key) (string, bool) {
		name, ok := strings.CutPrefix(key.String(), "example.com/")
		return filepath.Join(root, name), ok
	}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	do := func(name, gitProtocol string, body []byte) string {
		t.Helper()
		url := srv.URL + "/example.com/" + name + ".git"
		method := http.MethodPost
		if body == nil {
			method, url = http.MethodGet, url+"/info/refs?service=git-upload-pack"
		} else {
			url += "/git-upload-pack"
		}
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if gitProtocol != "" {
			req.Header.Set("Git-Protocol", gitProtocol)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", name, gitProtocol, resp.StatusCode, b)
		}
		return string(b)
	}
	listings := [][]string{{}, {"unborn"}, {"peel", "symrefs", "unborn"}, {"ref-prefix HEAD", "symrefs", "unborn", "peel"},
		{"ref-prefix refs/heads/"}, {"ref-prefix refs/heads/a", "ref-prefix refs/heads/a/", "ref-prefix refs/tags/t", "symrefs", "peel"},
		{"ref-prefix refs/nothing/", "ref-prefix refs/gitfleet/", "ref-prefix refs/archive/"}, {"ref-prefix H", "unborn", "symrefs"}}
	service := pkt("# service=git-upload-pack\n") + "0000"
	for _, name := range names {
		dir := filepath.Join(root, name)
		if got, want := do(name, "", nil), service+gitAnswer(t, dir, "", nil); got != want {
			t.Errorf("%s: v0 advertisement\n got %q\nwant %q", name, got, want)
		}
		if got, want := do(name, "version=1", nil), service+gitAnswer(t, dir, "version=1", nil); got != want {
			t.Errorf("%s: v1 advertisement\n got %q\nwant %q", name, got, want)
		}
		if got, want := do(name, "version=2", nil), servedV2Caps(gitAnswer(t, dir, "version=2", nil)); got != want {
			t.Errorf("%s: v2 capabilities\n got %q\nwant %q", name, got, want)
		}
		for _, args := range listings {
			body := lsRefsAsked(args...)
			if got, want := do(name, "version=2", body), gitAnswer(t, dir, "version=2", body); got != want {
				t.Errorf("%s: ls-refs %q\n got %q\nwant %q", name, args, got, want)
			}
		}
	}
	// Three runs read git's capabilities (for no refs, for v2, for a
	// branch); none answered a request.
	if answers, _ := gitserve.SharedRuns(h); answers != 3 {
		t.Errorf("git ran %d times for the answers, want 3 (the capabilities, once)", answers)
	}
}
