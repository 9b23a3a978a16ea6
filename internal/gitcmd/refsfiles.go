package gitcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
