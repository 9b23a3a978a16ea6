package gittest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// This file makes hostile upstreams: repositories larger than a limit,
// with more refs than a limit or with ref names no file system stores, a
// server that sends slowly and counts what it sent, and one whose packs
// leave out an object.

// AddBlob commits a file of size random (incompressible) bytes on top of
// branch in name's bare repository, and returns the new commit.
func (u *Upstreams) AddBlob(name, branch string, size int) (string, error) {
	bare := filepath.Join(u.Dir, name+".git")
	f, err := os.CreateTemp(u.work, "blob-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	f.Close()
	blob, err := Output("", "--git-dir="+bare, "hash-object", "-w", f.Name())
	if err != nil {
		return "", err
	}
	tree, err := outputIn(bare, "100644 blob "+strings.TrimSpace(blob)+"\tbig.bin\n", "mktree")
	if err != nil {
		return "", err
	}
	parent, err := Output("", "--git-dir="+bare, "rev-parse", "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	commit, err := Output("", "--git-dir="+bare, "commit-tree", "-p", strings.TrimSpace(parent), "-m", "big", strings.TrimSpace(tree))
	if err != nil {
		return "", err
	}
	commit = strings.TrimSpace(commit)
	return commit, Git("", "--git-dir="+bare, "update-ref", "refs/heads/"+branch, commit)
}

// AddRefs points each of names at the commit of branch in name's bare
// repository, written straight into packed-refs as a hostile server keeps
// them: names no file system could hold as a loose ref (4,000 bytes) are
// served all the same.
func (u *Upstreams) AddRefs(name, branch string, names []string) error {
	bare := filepath.Join(u.Dir, name+".git")
	if err := Git("", "--git-dir="+bare, "pack-refs", "--all"); err != nil {
		return err
	}
	oid, err := Output("", "--git-dir="+bare, "rev-parse", "refs/heads/"+branch)
	if err != nil {
		return err
	}
	oid = strings.TrimSpace(oid)
	path := filepath.Join(bare, "packed-refs")
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := map[string]string{}
	for _, l := range strings.Split(string(old), "\n") {
		if o, n, ok := strings.Cut(l, " "); ok && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "^") {
			lines[n] = o
		}
	}
	for _, n := range names {
		lines[n] = oid
	}
	sorted := make([]string, 0, len(lines))
	for n := range lines {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b bytes.Buffer
	b.WriteString("# pack-refs with: sorted \n")
	for _, n := range sorted {
		fmt.Fprintf(&b, "%s %s\n", lines[n], n)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func outputIn(gitDir, stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = Env()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Slow serves the same repositories as u at BytesPerSecond, counting the
// bytes of every response body it sent.
type Slow struct {
	URL  string
	Sent atomic.Int64
	srv  *http.Server
}

// StartSlow serves u's repositories on another port of 127.0.0.1 at
// bytesPerSecond.
func (u *Upstreams) StartSlow(bytesPerSecond int) (*Slow, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Slow{URL: "http://" + ln.Addr().String()}
	inner := u.srv.Handler
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(&slowWriter{ResponseWriter: w, rate: bytesPerSecond, sent: &s.Sent}, r)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// RepoURL is the clone URL of name on the slow server.
func (s *Slow) RepoURL(name string) string { return s.URL + "/" + name + ".git" }

// Close stops the server.
func (s *Slow) Close() { _ = s.srv.Close() }

type slowWriter struct {
	http.ResponseWriter
	rate int
	sent *atomic.Int64
}

func (w *slowWriter) Write(p []byte) (int, error) {
	const chunk = 16 << 10
	n := 0
	for len(p) > 0 {
		c := min(len(p), chunk)
		time.Sleep(time.Duration(c) * time.Second / time.Duration(w.rate))
		m, err := w.ResponseWriter.Write(p[:c])
		n += m
		w.sent.Add(int64(m))
		if err != nil {
			return n, err
		}
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		p = p[c:]
	}
	return n, nil
}

func (w *slowWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Omitting serves the same repositories as u, but answers every fetch with
// a pack of what the client asked for less one object (Omit), made by git
// from the repository: a source whose packs leave out what its refs need.
type Omitting struct {
	URL   string
	Omit  string
	dir   string
	inner http.Handler
	srv   *http.Server
	sent  atomic.Int64
}

// StartOmitting serves u's repositories on another port of 127.0.0.1,
// leaving omit out of every pack.
func (u *Upstreams) StartOmitting(omit string) (*Omitting, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &Omitting{URL: "http://" + ln.Addr().String(), Omit: omit, dir: u.Dir, inner: u.srv.Handler}
	o.srv = &http.Server{Handler: o}
	go func() { _ = o.srv.Serve(ln) }()
	return o, nil
}

// RepoURL is the clone URL of name on the omitting server.
func (o *Omitting) RepoURL(name string) string { return o.URL + "/" + name + ".git" }

// Close stops the server.
func (o *Omitting) Close() { _ = o.srv.Close() }

func (o *Omitting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lines, ok := readFetch(w, r, o.inner)
	if !ok {
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), ".git/")
	repo := filepath.Join(o.dir, filepath.FromSlash(filepath.Clean("/"+name))+".git")
	revs := []string{"--git-dir=" + repo, "rev-list", "--objects"}
	for l := range lines {
		if oid, ok := strings.CutPrefix(l, "want "); ok {
			revs = append(revs, oid)
		}
	}
	listed, err := Output("", revs...)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var keep strings.Builder
	for _, l := range strings.Split(listed, "\n") {
		if oid, _, _ := strings.Cut(l, " "); oid != "" && oid != o.Omit {
			keep.WriteString(oid + "\n")
		}
	}
	pack, err := outputIn(repo, keep.String(), "pack-objects", "--stdout", "-q")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pw := &pktWriter{w: w, sent: &o.sent}
	_, _ = startPack(w, pw, lines).Write([]byte(pack))
	pw.raw([]byte("0000"))
}
