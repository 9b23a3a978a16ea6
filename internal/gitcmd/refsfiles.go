package gitcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// errUnusual: the repository's refs are not in the plain shape that
// readRefFiles reads; ask git instead.
var errUnusual = errors.New("refs not in the plain files layout")

// StoredRefs reads the mirrored refs and HEAD of the bare repository at
// dir like LocalRefs, without the committer times, and without starting a
// process when it can: the files backend (loose refs, then packed-refs) is
// read directly. Anything it does not expect (a symbolic ref among the
// branches, a reference storage extension, a malformed file) is left to
// git. It is what a check needs before it knows whether anything changed.
func (r *Runner) StoredRefs(ctx context.Context, dir string) (Refs, error) {
	refs, err := readRefFiles(dir)
	if err == nil {
		return refs, nil
	}
	return r.LocalRefs(ctx, dir)
}

// readRefFiles reads the refs of a repository in git's files layout. Loose
// refs are read before packed-refs: a `git pack-refs` running meanwhile
// writes packed-refs before it deletes the loose files, so a ref is never
// missed (git's own readers rely on the same order).
func readRefFiles(dir string) (Refs, error) {
	if cfg, err := os.ReadFile(filepath.Join(dir, "config")); err != nil || bytes.Contains(bytes.ToLower(cfg), []byte("refstorage")) {
		return Refs{}, errUnusual
	}
	refs := Refs{Refs: map[string]string{}}
	for _, ns := range MirroredRefs {
		if err := readLooseRefs(dir, strings.TrimSuffix(ns, "/"), refs.Refs); err != nil {
			return Refs{}, err
		}
	}
	if err := readPackedRefs(filepath.Join(dir, "packed-refs"), refs.Refs); err != nil {
		return Refs{}, err
	}
	head, err := readHead(dir)
	if err != nil {
		return Refs{}, err
	}
	refs.Head = head
	return refs, nil
}

func readLooseRefs(dir, ns string, into map[string]string) error {
	root := filepath.Join(dir, filepath.FromSlash(ns))
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // no such namespace, or a ref deleted meanwhile
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := filepath.ToSlash(p[len(dir)+1:])
		if strings.HasSuffix(name, ".lock") {
			return nil // a ref being written; not a ref (git skips it too)
		}
		if !d.Type().IsRegular() {
			return errUnusual
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		oid := strings.TrimSpace(string(b))
		if !isOID(oid) {
			return errUnusual // a symbolic ref, or a broken file
		}
		into[name] = oid
		return nil
	})
	return err
}

func readPackedRefs(path string, into map[string]string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue // the header, or the peeled value of the tag above
		}
		oid, name, ok := strings.Cut(line, " ")
		if !ok || !isOID(oid) {
			return errUnusual
		}
		if !mirrored(name) {
			continue
		}
		if _, loose := into[name]; !loose { // a loose ref overrides its packed value
			into[name] = oid
		}
	}
	return sc.Err()
}

// readHead returns HEAD's target when it is a symbolic ref, and "" when it
// is detached, as `git symbolic-ref -q HEAD` does.
func readHead(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if target, ok := strings.CutPrefix(s, "ref: "); ok {
		if !strings.HasPrefix(target, "refs/") {
			return "", errUnusual
		}
		return target, nil
	}
	if isOID(s) {
		return "", nil
	}
	return "", errUnusual
}

// PackedRefs is the packed-refs file of a repository whose refs are refs
// (name to object ID), as `git pack-refs` writes one, sorted by name,
// without the peeled values of tags (git reads the objects for them; `git
// pack-refs --all` adds them when it next runs). A fresh mirror gets its
// refs so, in one file, as `git clone` writes them: written by a fetch,
// each would be a file of its own, written and then packed. An ID that is
// not one, and names git does not store side by side (one a directory of
// the other: refs/heads/a and refs/heads/a/b), are refused, as a fetch
// would refuse them; the names must be ones git writes as refs
// (ListRefsAndHead keeps only those).
func PackedRefs(refs map[string]string) ([]byte, error) {
	names := make([]string, 0, len(refs))
	for name, oid := range refs {
		if !isOID(oid) {
			return nil, fmt.Errorf("gitcmd: ref %q: %q is not an object ID", name, oid)
		}
		if strings.ContainsAny(name, " \n") {
			return nil, fmt.Errorf("gitcmd: ref %q: not a name packed-refs holds", name)
		}
		names = append(names, name)
	}
	for _, name := range names {
		for i := strings.IndexByte(name, '/'); i >= 0; i = next(name, i) {
			if _, ok := refs[name[:i]]; ok {
				return nil, fmt.Errorf("gitcmd: refs %q and %q: one would be a directory of the other", name[:i], name)
			}
		}
	}
	sort.Strings(names) // byte order, git's
	var b bytes.Buffer
	b.WriteString("# pack-refs with: sorted \n")
	for _, name := range names {
		b.WriteString(refs[name])
		b.WriteByte(' ')
		b.WriteString(name)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// next is the index of the '/' in name after the one at i, or -1.
func next(name string, i int) int {
	j := strings.IndexByte(name[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
