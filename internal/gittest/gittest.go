// Package gittest makes real upstream repositories and a real git smart-HTTP
// server on 127.0.0.1 for tests and the demo, hostile ones too (slow,
// endless, huge), and plays a client that trickles its request body. It
// uses the plain git CLI (these are upstreams, not the mirror's own
// hardened git work).
package gittest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Upstreams is a directory of bare repositories served over HTTP.
type Upstreams struct {
	Dir  string // bare repositories live at Dir/<name>.git
	URL  string // http://127.0.0.1:PORT
	work string
	srv  *http.Server
	mu   sync.Mutex
	n    int
	// listings counts ref advertisements (GET info/refs) by repository
	// name: one per ls-remote, check or fetch a client makes.
	listings map[string]int
	// requests counts every HTTP request by repository name: a ref
	// advertisement, a ref listing and a fetch are one each.
	requests map[string]int
	// sent counts the bytes of the answers by repository name (bodies
	// only): what clients downloaded from it.
	sent map[string]int64
	// packs counts the requests for a pack by repository name: a v2
	// fetch command, or a v0 request with wants.
	packs map[string]int
	// names maps the lower-case names of created repositories to their
	// names: keys are lower case, upstream names need not be.
	names map[string]string
}

// Start serves dir (created if missing) on a free port of 127.0.0.1.
func Start(dir string) (*Upstreams, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "gittest-work-")
	if err != nil {
		return nil, err
	}
	u := &Upstreams{Dir: dir, work: work, listings: map[string]int{}, requests: map[string]int{}, sent: map[string]int64{}, packs: map[string]int{}, names: map[string]string{}}
	h := &gitserve.Handler{Git: gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}), Resolve: func(key repokey.Key) (string, bool) {
		// keys look like 127.0.0.1:PORT/<name> in lower case; serve by
		// name, whatever its case, as GitHub does.
		_, name, _ := strings.Cut(key.String(), "/")
		u.mu.Lock()
		if real, ok := u.names[name]; ok {
			name = real
		}
		u.mu.Unlock()
		p := filepath.Join(dir, filepath.FromSlash(name)+".git")
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, true
		}
		return "", false
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u.URL = "http://" + ln.Addr().String()
	// The handler sees "/<name>.git/..."; prefix the host so it parses as a key.
	host := ln.Addr().String()
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, _, ok := strings.Cut(r.URL.Path, ".git/"); ok {
			name = strings.TrimPrefix(name, "/")
			u.mu.Lock()
			u.requests[name]++
			if strings.HasSuffix(r.URL.Path, ".git/info/refs") {
				u.listings[name]++
			}
			u.mu.Unlock()
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ".git/git-upload-pack") {
				var pack bool
				if r.Body, pack = asksForPack(r); pack {
					u.mu.Lock()
					u.packs[name]++
					u.mu.Unlock()
				}
			}
			w = &countingWriter{ResponseWriter: w, u: u, name: name}
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + host + r.URL.Path
		h.ServeHTTP(w, r2)
	})}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// Close stops the server.
func (u *Upstreams) Close() {
	_ = u.srv.Close()
	_ = os.RemoveAll(u.work)
}

// Listings is how many times a client has asked for the refs of name.
func (u *Upstreams) Listings(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.listings[name]
}

// Requests is how many HTTP requests a client has made for name: git's
// smart HTTP makes one for the advertisement (GET info/refs), one for each
// protocol v2 command (ls-refs, fetch) and one for each v0 fetch round.
func (u *Upstreams) Requests(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests[name]
}

// Packs is how many requests for a pack of name clients have made: git
// fetches and clones, not ref listings.
func (u *Upstreams) Packs(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.packs[name]
}

// asksForPack reads an upload-pack request's body (gzipped or not) and
// tells whether it asks for a pack: a v2 fetch command, or v0 wants. It
// returns a body that reads the same bytes again.
func asksForPack(r *http.Request) (io.ReadCloser, bool) {
	raw, err := io.ReadAll(r.Body)
	r.Body.Close()
	body := io.NopCloser(bytes.NewReader(raw))
	if err != nil {
		return body, false
	}
	text := raw
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return body, false
		}
		if text, err = io.ReadAll(zr); err != nil {
			return body, false
		}
	}
	return body, bytes.Contains(text, []byte("command=fetch")) || bytes.Contains(text, []byte("want "))
}

// Sent is how many bytes of answers (bodies) the server has sent for name:
// what its clients downloaded from it.
func (u *Upstreams) Sent(name string) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent[name]
}

// countingWriter counts the body bytes of an answer for one repository.
type countingWriter struct {
	http.ResponseWriter
	u    *Upstreams
	name string
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.u.mu.Lock()
	c.u.sent[c.name] += int64(n)
	c.u.mu.Unlock()
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// RepoURL is the clone URL of name.
func (u *Upstreams) RepoURL(name string) string { return u.URL + "/" + name + ".git" }

// Create makes a bare repository name with the given branches (first is
// HEAD), each with one commit (a later branch's on top of the first's),
// and the given annotated tags on the first branch; and a work tree of it
// for Commit. The history is written by one git fast-import and the work
// tree is a clone: three git processes whatever the branches and tags,
// where committing and pushing each took a dozen (end-to-end tests make
// hundreds of upstreams on a busy machine).
func (u *Upstreams) Create(name string, branches, tags []string) error {
	u.mu.Lock()
	u.names[strings.ToLower(name)] = name
	u.mu.Unlock()
	bare := filepath.Join(u.Dir, name+".git")
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		return err
	}
	if err := Git("", "init", "-q", "--bare", "-b", branches[0], bare); err != nil {
		return err
	}
	var s strings.Builder
	when := fmt.Sprintf("%s %d +0000", identity, time.Now().Unix())
	for i, b := range branches {
		what := u.change(name + " " + b)
		fmt.Fprintf(&s, "commit refs/heads/%s\nauthor %s\ncommitter %s\ndata %d\n%s\n", b, when, when, len(what)+1, what+"\n")
		if i > 0 {
			fmt.Fprintf(&s, "from refs/heads/%s\n", branches[0])
		}
		fmt.Fprintf(&s, "M 100644 inline file.txt\ndata %d\n%s\n", len(what)+1, what+"\n")
		if i == 0 {
			for _, t := range tags {
				msg := "tag " + t
				fmt.Fprintf(&s, "tag %s\nfrom refs/heads/%s\ntagger %s\ndata %d\n%s\n", t, b, when, len(msg)+1, msg+"\n")
			}
		}
	}
	if err := FastImport(bare, s.String()); err != nil {
		return err
	}
	return Git("", "clone", "-q", bare, filepath.Join(u.work, name))
}

// FastImport runs git fast-import of stream into the bare repository
// bare. glibc's malloc is told to keep what it freed: with its default
// trim threshold, fast-import gives the top of its heap back and takes it
// again object after object (a brk call each), which cost 30 times the
// CPU (21 s against 0.7 s for 28,000 objects) and minutes of a busy
// machine.
func FastImport(bare, stream string) error {
	cmd := exec.Command("git", "--git-dir="+bare, "fast-import", "--quiet")
	cmd.Env = append(Env(), "GLIBC_TUNABLES=glibc.malloc.trim_threshold=67108864:glibc.malloc.top_pad=16777216")
	cmd.Stdin = strings.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git fast-import into %s: %w: %s", bare, err, out)
	}
	return nil
}

// identity is the author and committer of the commits Create and Commit
// make (Env's).
const identity = "gitfleet test <test@gitfleet.invalid>"

// Fork makes name a copy of base's bare repository (its branches and
// tags), as a forge's fork is, with a work tree for Commit.
func (u *Upstreams) Fork(base, name string) error {
	u.mu.Lock()
	u.names[strings.ToLower(name)] = name
	u.mu.Unlock()
	bare := filepath.Join(u.Dir, name+".git")
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		return err
	}
	if err := Git("", "clone", "-q", "--bare", "--no-local", filepath.Join(u.Dir, base+".git"), bare); err != nil {
		return err
	}
	return Git("", "clone", "-q", bare, filepath.Join(u.work, name))
}

// Commit adds a commit to branch of name and pushes it; it returns the new
// commit ID.
func (u *Upstreams) Commit(name, branch string) (string, error) {
	wt := filepath.Join(u.work, name)
	if err := Git(wt, "checkout", "-q", branch); err != nil {
		return "", err
	}
	if err := u.commitIn(wt, name+" "+branch); err != nil {
		return "", err
	}
	if err := Git(wt, "push", "-q", "origin", branch); err != nil {
		return "", err
	}
	out, err := Output(wt, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

func (u *Upstreams) commitIn(wt, what string) error {
	change := u.change(what)
	f := filepath.Join(wt, "file.txt")
	if err := os.WriteFile(f, []byte(change+"\n"), 0o644); err != nil {
		return err
	}
	if err := Git(wt, "add", "file.txt"); err != nil {
		return err
	}
	return Git(wt, "commit", "-q", "-m", change)
}

// change numbers a change of what: every commit's file and message are
// its own, so that no two repositories share a root (a shared root makes
// them a fork network).
func (u *Upstreams) change(what string) string {
	u.mu.Lock()
	u.n++
	n := u.n
	u.mu.Unlock()
	return fmt.Sprintf("%s change %d", what, n)
}

// Refs lists the branches and tags of name's bare repository.
func (u *Upstreams) Refs(name string) (map[string]string, error) {
	return RefsOf(filepath.Join(u.Dir, name+".git"))
}

// RefsOf lists the branches and tags of a repository directory.
func RefsOf(dir string) (map[string]string, error) {
	r := gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{})
	refs, err := r.LocalRefs(context.Background(), dir)
	return refs.Refs, err
}

// Env is a fixed identity and no user configuration for test git commands.
func Env() []string {
	return append(os.Environ(),
		"GIT_AUTHOR_NAME=gitfleet test", "GIT_AUTHOR_EMAIL=test@gitfleet.invalid",
		"GIT_COMMITTER_NAME=gitfleet test", "GIT_COMMITTER_EMAIL=test@gitfleet.invalid",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

// Git runs git in dir and returns an error with its output on failure.
func Git(dir string, args ...string) error {
	_, err := Output(dir, args...)
	return err
}

// Output runs git in dir and returns its stdout.
func Output(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
