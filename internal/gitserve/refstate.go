package gitserve

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// refsSnapshot is what of a bare repository, besides the request, decides
// upload-pack's answers, as read from its files in one pass: its refs
// (loose and packed), HEAD, its shallow file and its configuration.
// Objects need no look: an object's id names its content, and what is
// reachable and served is decided by the refs. It is read from files
// rather than by a git process; a ref moving while it is read gives a
// digest of neither state, which only misses what is shared.
type refsSnapshot struct {
	digest []byte
	stamp  refsStamp
	loose  []looseRef // in the order read
	packed []byte     // packed-refs
	head   []byte
	config [sha256.Size]byte // the digest of the configuration alone
	hexLen int               // of the repository's object ids: 40, or 64 for SHA-256
	// unsure, when set, says why the refs advertisement of this state is
	// left to git (see refsModel).
	unsure string
}

type looseRef struct {
	name    string // "refs/heads/main"
	content []byte
}

// snapshotFiles are the files of a repository, besides its loose refs,
// that a snapshot covers. reftable/tables.list changes with every update
// of a repository whose refs are in a reftable (git 2.45+), whose refs
// directory is then a stub.
var snapshotFiles = []string{"HEAD", "packed-refs", "shallow", "config", "reftable/tables.list"}

// readRefs reads the snapshot of the repository at dir. Loose refs are read
// before packed-refs, as git reads them: a `git pack-refs` running
// meanwhile writes packed-refs before it deletes the loose files, so a ref
// read here is never older than both.
func readRefs(dir string) (refsSnapshot, error) {
	s := refsSnapshot{stamp: newStamp(dir)}
	h := sha256.New()
	refs := filepath.Join(dir, "refs")
	err := filepath.WalkDir(refs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a ref deleted while we read
			}
			return err
		}
		if d.IsDir() {
			if path != refs { // stamped first
				s.stamp.add(path) // before its entries are read
			}
			return nil
		}
		if strings.HasSuffix(path, ".lock") {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		name := "refs" + filepath.ToSlash(path[len(refs):])
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		s.loose = append(s.loose, looseRef{name: name, content: b})
		return nil
	})
	if err != nil {
		return refsSnapshot{}, fmt.Errorf("reading the refs of %s: %w", dir, err)
	}
	for _, name := range snapshotFiles {
		s.stamp.add(filepath.Join(dir, name))
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return refsSnapshot{}, fmt.Errorf("reading the refs of %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		switch name {
		case "shallow", "reftable/tables.list":
			if err == nil {
				s.unsure = "a " + name + " file"
			}
		case "HEAD":
			s.head = b
		case "packed-refs":
			s.packed = b
		case "config":
			s.config = sha256.Sum256(b)
			s.hexLen = hexLenOf(b)
			if sec := advertisingSection(b); sec != "" && s.unsure == "" {
				s.unsure = "a configuration section that upload-pack reads: " + sec
			}
		}
	}
	s.digest = h.Sum(nil)
	s.stamp.seal()
	return s, nil
}

// tips are the object ids that the snapshot's served refs point at (and,
// for tags that packed-refs peeled, the objects they peel to): a want
// among them is reachable at no cost. A loose ref hides its packed value;
// the hidden refs are left out, and so are symbolic refs and anything
// unreadable, which only sends a want to the full check.
func (s refsSnapshot) tips() map[string]bool {
	type value struct{ oid, peeled string }
	refs := map[string]value{}
	sc := bufio.NewScanner(bytes.NewReader(s.packed))
	sc.Buffer(nil, 1<<20)
	last := ""
	for sc.Scan() {
		line := sc.Text()
		if peeled, ok := strings.CutPrefix(line, "^"); ok {
			if v, ok := refs[last]; ok && gitcmd.IsOID(peeled) {
				v.peeled = peeled
				refs[last] = v
			}
			continue
		}
		oid, name, ok := strings.Cut(line, " ")
		if !ok || !gitcmd.IsOID(oid) {
			last = ""
			continue
		}
		refs[name], last = value{oid: oid}, name
	}
	for _, l := range s.loose {
		if oid := strings.TrimSpace(string(l.content)); gitcmd.IsOID(oid) {
			refs[l.name] = value{oid: oid}
		} else {
			delete(refs, l.name) // a symbolic or broken ref: not a tip we know
		}
	}
	tips := make(map[string]bool, len(refs)+1)
	for name, v := range refs {
		if unadvertised(name) {
			continue
		}
		tips[v.oid] = true
		if v.peeled != "" {
			tips[v.peeled] = true
		}
	}
	if oid := strings.TrimSpace(string(s.head)); gitcmd.IsOID(oid) {
		tips[oid] = true // a detached HEAD, which upload-pack advertises
	}
	return tips
}

// hexLenOf reads the length of a repository's object ids from its
// configuration: 64 when extensions.objectFormat is sha256 (git writes
// "objectformat = sha256" under [extensions]), else 40.
func hexLenOf(config []byte) int {
	for line := range strings.Lines(strings.ToLower(string(config))) {
		if strings.Join(strings.Fields(line), "") == "objectformat=sha256" {
			return 64
		}
	}
	return 40
}

// advertisingSections are the sections of a repository's configuration
// that change what upload-pack advertises (include may bring any of them
// in). The served git's own settings are the same for every repository,
// and are read once (capsTemplate).
var advertisingSections = []string{"uploadpack", "transfer", "lsrefs", "protocol", "include", "includeif"}

// advertisingSection returns the first section of config among
// advertisingSections ("" for none).
func advertisingSection(config []byte) string {
	for line := range strings.Lines(string(config)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "[") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "]")
		name, _, _ = strings.Cut(name, " ")
		name, _, _ = strings.Cut(name, "\"")
		if name = strings.ToLower(strings.TrimSpace(name)); slices.Contains(advertisingSections, name) {
			return name
		}
	}
	return ""
}
