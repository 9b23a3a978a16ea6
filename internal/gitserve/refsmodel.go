package gitserve

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// refsModel is the refs of one state as upload-pack advertises them, read
// from the snapshot's files and the object store rather than by a run of
// upload-pack: the refs advertisement (v0, v1) and the ls-refs listings
// (v2) are written from it (writeAdvertisement, writeListing), byte for
// byte as git 2.39 and later write them. A state it cannot model exactly
// (a broken or oddly written ref, a reftable, a shallow repository, a tag
// stored as a delta) is errUnsure, and git answers it.
type refsModel struct {
	head   *advertisedRef  // nil when HEAD does not resolve
	unborn string          // the ref that HEAD names when it names no ref
	refs   []advertisedRef // the served refs, by name
}

// advertisedRef is one ref as upload-pack advertises it. git 2.39
// advertises a ref whose object is missing, with no peeled value.
type advertisedRef struct {
	name   string
	oid    string
	target string // the ref a symbolic ref resolves to
	peeled string // what a tag peels to; "" for other objects
}

// refEntry is a ref as its file or packed-refs line says.
type refEntry struct {
	oid, symref string
	peeled      string
	knowsPeeled bool // packed-refs says whether it is a tag (peeled)
}

// maxSymrefDepth is how many symbolic refs git follows (SYMREF_MAXDEPTH).
const maxSymrefDepth = 5

// modelRefs builds the refs model of the snapshot s of the repository at
// dir.
func modelRefs(dir string, s *refsSnapshot) (*refsModel, error) {
	if s.unsure != "" {
		return nil, fmt.Errorf("%s: %w", s.unsure, errUnsure)
	}
	entries, err := parsePacked(s.packed, s.hexLen)
	if err != nil {
		return nil, err
	}
	for _, l := range s.loose {
		if !validRefName(l.name) {
			return nil, fmt.Errorf("ref name %q: %w", l.name, errUnsure)
		}
		e, err := parseLoose(l.content, s.hexLen)
		if err != nil {
			return nil, fmt.Errorf("ref %s: %w", l.name, err)
		}
		entries[l.name] = e
	}
	store, err := openObjects(dir, s.hexLen)
	if err != nil {
		return nil, err
	}
	defer store.close()
	m := &refsModel{}
	head, err := parseLoose(s.head, s.hexLen)
	if err != nil {
		return nil, fmt.Errorf("HEAD: %w", err)
	}
	switch name, e, ok := resolveRef(entries, "HEAD", head); {
	case !ok && name == "":
		return nil, fmt.Errorf("HEAD: a symbolic ref chain too long: %w", errUnsure)
	case !ok:
		m.unborn = name
	default:
		m.head = &advertisedRef{name: "HEAD", oid: e.oid}
		if head.symref != "" {
			m.head.target = name
		}
		if m.head.peeled, err = store.peel(e.oid); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		if !hiddenByConfig(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	m.refs = make([]advertisedRef, 0, len(names))
	for _, name := range names {
		e := entries[name]
		target, r, ok := resolveRef(entries, name, e)
		if !ok {
			if target == "" {
				return nil, fmt.Errorf("ref %s: a symbolic ref chain too long: %w", name, errUnsure)
			}
			continue // a symbolic ref to no ref: git leaves it out
		}
		ref := advertisedRef{name: name, oid: r.oid}
		if e.symref != "" {
			ref.target = target
		}
		if r.knowsPeeled && e.symref == "" {
			ref.peeled = r.peeled
		} else if ref.peeled, err = store.peel(r.oid); err != nil {
			return nil, fmt.Errorf("ref %s: %w", name, err)
		}
		m.refs = append(m.refs, ref)
	}
	return m, nil
}

// resolveRef follows e, the entry of name, to a ref with an object id. It
// returns the name it ends at and its entry; ok is false when it ends at
// no ref (name is then that ref's, or "" when the chain is too long).
func resolveRef(entries map[string]refEntry, name string, e refEntry) (string, refEntry, bool) {
	for range maxSymrefDepth + 1 {
		if e.symref == "" {
			return name, e, true
		}
		name = e.symref
		next, ok := entries[name]
		if !ok {
			return name, refEntry{}, false
		}
		e = next
	}
	return "", refEntry{}, false
}

// parseLoose reads a loose ref's file (or HEAD): an object id or
// "ref: <name>", and a newline.
func parseLoose(content []byte, hexLen int) (refEntry, error) {
	line, ok := bytes.CutSuffix(content, []byte("\n"))
	if !ok || bytes.ContainsAny(line, "\r\n\t") {
		return refEntry{}, fmt.Errorf("not as git writes a ref: %w", errUnsure)
	}
	if target, ok := bytes.CutPrefix(line, []byte("ref: ")); ok {
		if !strings.HasPrefix(string(target), "refs/") || !validRefName(string(target)) {
			return refEntry{}, fmt.Errorf("symbolic ref to %q: %w", target, errUnsure)
		}
		return refEntry{symref: string(target)}, nil
	}
	if len(line) != hexLen || !gitcmd.IsOID(string(line)) {
		return refEntry{}, fmt.Errorf("not an object id: %w", errUnsure)
	}
	return refEntry{oid: string(line)}, nil
}

// parsePacked reads packed-refs: "<oid> <name>" lines, each followed by
// "^<peeled>" when the ref is a tag and the file says so (the "peeled"
// trait for refs/tags/, "fully-peeled" for every ref).
func parsePacked(packed []byte, hexLen int) (map[string]refEntry, error) {
	entries := map[string]refEntry{}
	sc := bufio.NewScanner(bytes.NewReader(packed))
	sc.Buffer(nil, 1<<20)
	var peeledTags, fully bool
	last := ""
	for first := true; sc.Scan(); first = false {
		line := sc.Text()
		if traits, ok := strings.CutPrefix(line, "# pack-refs with:"); ok && first {
			for _, t := range strings.Fields(traits) {
				peeledTags = peeledTags || t == "peeled"
				fully = fully || t == "fully-peeled"
			}
			continue
		}
		if p, ok := strings.CutPrefix(line, "^"); ok {
			e, known := entries[last]
			if !known || len(p) != hexLen || !gitcmd.IsOID(p) || e.peeled != "" {
				return nil, fmt.Errorf("packed-refs line %q: %w", line, errUnsure)
			}
			e.peeled = p
			entries[last] = e
			continue
		}
		oid, name, ok := strings.Cut(line, " ")
		if !ok || len(oid) != hexLen || !gitcmd.IsOID(oid) || !validRefName(name) {
			return nil, fmt.Errorf("packed-refs line %q: %w", line, errUnsure)
		}
		entries[name] = refEntry{oid: oid, knowsPeeled: fully || (peeledTags && strings.HasPrefix(name, "refs/tags/"))}
		last = name
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("packed-refs: %v: %w", err, errUnsure)
	}
	return entries, nil
}

// validRefName says whether name is a ref name that git takes as it is
// (check_refname_format): under refs/, no control characters, spaces or
// any of ~^:?*[\, no "..", "@{" or "//", no component that begins with a
// dot or ends with ".lock", not ending with "/" or ".". A name it refuses
// is left to git, which may still take it.
func validRefName(name string) bool {
	if !strings.HasPrefix(name, "refs/") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") || strings.Contains(name, "/.") {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "@" || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c == 0x7f || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return false
		}
	}
	return true
}

// advertisementCaps are the capabilities of a v0 refs advertisement as the
// served git writes them, around where HEAD's symref goes (see
// capsTemplate).
type advertisementCaps struct{ before, after string }

// writeAdvertisement writes the v0 refs advertisement of m, as
// `git upload-pack --stateless-rpc --advertise-refs` does: HEAD and the
// refs, each tag followed by what it peels to, the capabilities after the
// first, and a flush. empty is git's answer for no refs at all.
func (m *refsModel) writeAdvertisement(caps advertisementCaps, empty []byte) []byte {
	refs := m.refs
	if m.head != nil {
		refs = append([]advertisedRef{*m.head}, refs...)
	}
	if len(refs) == 0 {
		return empty
	}
	var b bytes.Buffer
	for i, r := range refs {
		if i == 0 {
			line := r.oid + " " + r.name + "\x00" + caps.before
			if m.head != nil && m.head.target != "" {
				line += " symref=HEAD:" + m.head.target
			}
			writePkt(&b, line+caps.after+"\n")
		} else {
			writePkt(&b, r.oid+" "+r.name+"\n")
		}
		if r.peeled != "" {
			writePkt(&b, r.peeled+" "+r.name+"^{}\n")
		}
	}
	b.WriteString("0000")
	return b.Bytes()
}

// tooManyPrefixes is where git's ls-refs ignores the prefixes asked for
// and lists every ref (TOO_MANY_PREFIXES).
const tooManyPrefixes = 65536

// writeListing writes the ls-refs answer of m to req (its ref-prefix,
// symrefs, peel and unborn arguments), as git's ls-refs does. unborn says
// whether the served git lists an unborn HEAD (it advertises ls-refs=unborn).
func (m *refsModel) writeListing(req *uploadRequest, unborn bool) []byte {
	prefixes := req.Prefixes
	if len(prefixes) >= tooManyPrefixes {
		prefixes = nil
	}
	match := func(name string) bool {
		if len(prefixes) == 0 {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	var b bytes.Buffer
	line := func(r advertisedRef, oid string) {
		s := oid + " " + r.name
		if oid == "" {
			s = "unborn " + r.name
		}
		if req.Symrefs && r.target != "" {
			s += " symref-target:" + r.target
		}
		if req.Peel && r.peeled != "" {
			s += " peeled:" + r.peeled
		}
		writePkt(&b, s+"\n")
	}
	switch {
	case !match("HEAD"):
	case m.head != nil:
		line(*m.head, m.head.oid)
	case m.unborn != "" && unborn && req.Unborn && req.Symrefs:
		line(advertisedRef{name: "HEAD", target: m.unborn}, "")
	}
	for _, r := range m.refs {
		if match(r.name) {
			line(r, r.oid)
		}
	}
	b.WriteString("0000")
	return b.Bytes()
}

func writePkt(b *bytes.Buffer, s string) {
	fmt.Fprintf(b, "%04x%s", len(s)+4, s)
}

// hiddenByConfig tells whether upload-pack, given uploadpack.hideRefs for
// hiddenRefs and archiveRefs (Handler.uploadPack), hides the ref name: a
// ref under either namespace, or named as the namespace itself.
func hiddenByConfig(name string) bool {
	for _, ns := range []string{hiddenRefs, archiveRefs} {
		if name == strings.TrimSuffix(ns, "/") || strings.HasPrefix(name, ns) {
			return true
		}
	}
	return false
}
