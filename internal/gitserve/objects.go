package gitserve

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// objectStore answers the question about objects that the refs
// advertisement asks, read from a repository's files rather than by a
// git process: what a tag peels to. It reads loose objects and
// the packs of the repository and of its alternates (a fork pool's), with
// their version 2 indexes mapped into memory. What it cannot answer
// exactly (a tag stored as a delta, an index of another version) is
// errUnsure: the caller then asks git. It is not safe for concurrent use;
// close it when done.
type objectStore struct {
	dirs   []string // objects directories: the repository's, then its alternates'
	packs  []*packIndex
	hexLen int
}

// errUnsure says that the store cannot answer exactly; git can.
var errUnsure = errors.New("not answered from the object files")

// errMissing says that an object is not in the store; it is errUnsure
// but for the object a ref names (see peel).
var errMissing = fmt.Errorf("missing: %w", errUnsure)

// Object types as git stores them in a pack.
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

var objTypeNames = map[string]int{"commit": objCommit, "tree": objTree, "blob": objBlob, "tag": objTag}

// maxTagSize bounds the tag objects read to peel them.
const maxTagSize = 1 << 20

// maxAlternates bounds the alternates followed, as git's own depth does.
const maxAlternates = 5

// openObjects opens the object store of the repository at dir.
func openObjects(dir string, hexLen int) (*objectStore, error) {
	s := &objectStore{hexLen: hexLen}
	if err := s.add(filepath.Join(dir, "objects"), 0); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *objectStore) add(objects string, depth int) error {
	if depth > maxAlternates {
		return fmt.Errorf("alternates nested deeper than %d at %s: %w", maxAlternates, objects, errUnsure)
	}
	for _, d := range s.dirs {
		if d == objects {
			return nil
		}
	}
	s.dirs = append(s.dirs, objects)
	idxs, err := filepath.Glob(filepath.Join(objects, "pack", "pack-*.idx"))
	if err != nil {
		return err
	}
	for _, idx := range idxs {
		pack := strings.TrimSuffix(idx, ".idx") + ".pack"
		if _, err := os.Stat(pack); err != nil {
			continue // git uses only the packs whose pack file is there
		}
		p, err := openPackIndex(idx, pack, s.hexLen/2)
		if err != nil {
			return err
		}
		s.packs = append(s.packs, p)
	}
	alt, err := os.ReadFile(filepath.Join(objects, "info", "alternates"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(alt)) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '"' {
			return fmt.Errorf("quoted alternate %q: %w", line, errUnsure)
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(objects, line)
		}
		if err := s.add(filepath.Clean(line), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (s *objectStore) close() {
	for _, p := range s.packs {
		p.close()
	}
	s.packs = nil
}

// peel returns what oid peels to: the object that a chain of tags ends
// at, as git's peel_object finds it (the last tag's target, which need
// not be there), or "" when oid is not a tag or is missing. A missing tag
// further in the chain is errUnsure.
func (s *objectStore) peel(oid string) (string, error) {
	peeled := ""
	for range 100 {
		typ, body, err := s.read(oid, true)
		if errors.Is(err, errMissing) && peeled == "" {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if typ != objTag {
			return peeled, nil
		}
		target, targetType, err := parseTag(body, s.hexLen)
		if err != nil {
			return "", fmt.Errorf("tag %s: %v: %w", oid, err, errUnsure)
		}
		peeled, oid = target, target
		if targetType != objTag {
			return peeled, nil
		}
	}
	return "", fmt.Errorf("tag chain from %s longer than 100: %w", oid, errUnsure)
}

// parseTag reads a tag object's "object" and "type" lines.
func parseTag(body []byte, hexLen int) (target string, typ int, err error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "object "); ok && target == "" {
			target = v
		} else if v, ok := strings.CutPrefix(line, "type "); ok && typ == 0 {
			typ = objTypeNames[v]
		}
	}
	if len(target) != hexLen || typ == 0 {
		return "", 0, errors.New("no object or type line")
	}
	return target, typ, nil
}

// read returns the type of oid and, when it is a tag and withTag is set,
// its content.
func (s *objectStore) read(oid string, withTag bool) (int, []byte, error) {
	raw, err := hex.DecodeString(oid)
	if err != nil || len(raw) != s.hexLen/2 {
		return 0, nil, fmt.Errorf("bad object id %q: %w", oid, errUnsure)
	}
	for _, p := range s.packs {
		if off, ok := p.find(raw); ok {
			return s.readPacked(p, off, withTag)
		}
	}
	for _, d := range s.dirs {
		f, err := os.Open(filepath.Join(d, oid[:2], oid[2:]))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		defer f.Close()
		return readLoose(f, withTag)
	}
	return 0, nil, fmt.Errorf("object %s: %w", oid, errMissing)
}

func readLoose(f io.Reader, withTag bool) (int, []byte, error) {
	zr, err := zlib.NewReader(f)
	if err != nil {
		return 0, nil, fmt.Errorf("loose object: %v: %w", err, errUnsure)
	}
	defer zr.Close()
	br := bufio.NewReader(io.LimitReader(zr, maxTagSize+64))
	hdr, err := br.ReadString(0)
	if err != nil {
		return 0, nil, fmt.Errorf("loose object header: %v: %w", err, errUnsure)
	}
	name, size, _ := strings.Cut(strings.TrimSuffix(hdr, "\x00"), " ")
	typ := objTypeNames[name]
	n, err := strconv.Atoi(size)
	if typ == 0 || err != nil {
		return 0, nil, fmt.Errorf("loose object header %q: %w", hdr, errUnsure)
	}
	if typ != objTag || !withTag {
		return typ, nil, nil
	}
	if n > maxTagSize {
		return 0, nil, fmt.Errorf("tag of %d bytes: %w", n, errUnsure)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return 0, nil, fmt.Errorf("loose tag: %v: %w", err, errUnsure)
	}
	return typ, body, nil
}

// readPacked reads the object at off in p's pack: its type, following
// deltas to their base, and a tag's content. A tag stored as a delta is
// errUnsure (its content would need the delta applied).
func (s *objectStore) readPacked(p *packIndex, off uint64, withTag bool) (int, []byte, error) {
	f, err := os.Open(p.packPath)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	for range 10000 {
		var hdr [32]byte
		n, err := f.ReadAt(hdr[:], int64(off))
		if n == 0 {
			return 0, nil, fmt.Errorf("pack %s at %d: %v: %w", p.packPath, off, err, errUnsure)
		}
		c := hdr[0]
		typ := int(c>>4) & 7
		size := uint64(c & 15)
		i, shift := 1, 4
		for c&0x80 != 0 && i < n {
			c = hdr[i]
			i++
			size |= uint64(c&0x7f) << shift
			shift += 7
		}
		switch typ {
		case objCommit, objTree, objBlob:
			return typ, nil, nil
		case objTag:
			if !withTag {
				return typ, nil, nil
			}
			if size > maxTagSize {
				return 0, nil, fmt.Errorf("tag of %d bytes: %w", size, errUnsure)
			}
			zr, err := zlib.NewReader(io.NewSectionReader(f, int64(off)+int64(i), 1<<62))
			if err != nil {
				return 0, nil, fmt.Errorf("packed tag: %v: %w", err, errUnsure)
			}
			body := make([]byte, size)
			_, err = io.ReadFull(zr, body)
			zr.Close()
			if err != nil {
				return 0, nil, fmt.Errorf("packed tag: %v: %w", err, errUnsure)
			}
			return typ, body, nil
		case objOfsDelta:
			if i >= n {
				return 0, nil, fmt.Errorf("pack %s at %d: short delta: %w", p.packPath, off, errUnsure)
			}
			c = hdr[i]
			i++
			rel := uint64(c & 0x7f)
			for c&0x80 != 0 && i < n {
				c = hdr[i]
				i++
				rel = (rel+1)<<7 | uint64(c&0x7f)
			}
			if rel == 0 || rel > off {
				return 0, nil, fmt.Errorf("pack %s at %d: bad delta base: %w", p.packPath, off, errUnsure)
			}
			off -= rel
		case objRefDelta:
			base := make([]byte, s.hexLen/2)
			if _, err := f.ReadAt(base, int64(off)+int64(i)); err != nil {
				return 0, nil, fmt.Errorf("pack %s at %d: %v: %w", p.packPath, off, err, errUnsure)
			}
			baseOff, ok := p.find(base)
			if !ok {
				return 0, nil, fmt.Errorf("pack %s: delta base outside the pack: %w", p.packPath, errUnsure)
			}
			off = baseOff
		default:
			return 0, nil, fmt.Errorf("pack %s at %d: object type %d: %w", p.packPath, off, typ, errUnsure)
		}
		if withTag {
			// A delta's type is its base's; a tag's content would need the
			// delta applied: a tag among deltas is left to git.
			typ, _, err := s.readPacked(p, off, false)
			if err == nil && typ == objTag {
				err = fmt.Errorf("pack %s: a tag stored as a delta: %w", p.packPath, errUnsure)
			}
			return typ, nil, err
		}
	}
	return 0, nil, fmt.Errorf("pack %s: delta chain too long: %w", p.packPath, errUnsure)
}

// packIndex is a pack's version 2 index, mapped into memory.
type packIndex struct {
	packPath string
	data     []byte
	n        int // objects
	hashLen  int
}

func openPackIndex(idxPath, packPath string, hashLen int) (*packIndex, error) {
	f, err := os.Open(idxPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size < 8+256*4 {
		return nil, fmt.Errorf("pack index %s: too short: %w", idxPath, errUnsure)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", idxPath, err)
	}
	p := &packIndex{packPath: packPath, data: data, hashLen: hashLen}
	if !bytes.Equal(data[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		p.close()
		return nil, fmt.Errorf("pack index %s is not of version 2: %w", idxPath, errUnsure)
	}
	p.n = int(binary.BigEndian.Uint32(data[8+255*4:]))
	if int64(8+256*4+p.n*(hashLen+8)) > size {
		p.close()
		return nil, fmt.Errorf("pack index %s: truncated: %w", idxPath, errUnsure)
	}
	return p, nil
}

func (p *packIndex) close() {
	if p.data != nil {
		_ = unix.Munmap(p.data)
		p.data = nil
	}
}

// find returns the pack offset of the object raw, if the pack has it.
func (p *packIndex) find(raw []byte) (uint64, bool) {
	const fanout = 8
	lo := 0
	if raw[0] > 0 {
		lo = int(binary.BigEndian.Uint32(p.data[fanout+4*(int(raw[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(p.data[fanout+4*int(raw[0]):]))
	names := p.data[fanout+256*4:]
	for lo < hi {
		mid := (lo + hi) / 2
		switch c := bytes.Compare(names[mid*p.hashLen:(mid+1)*p.hashLen], raw); {
		case c == 0:
			return p.offset(mid)
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return 0, false
}

func (p *packIndex) offset(i int) (uint64, bool) {
	offsets := p.data[8+256*4+p.n*(p.hashLen+4):]
	o := binary.BigEndian.Uint32(offsets[4*i:])
	if o&0x80000000 == 0 {
		return uint64(o), true
	}
	large := offsets[4*p.n:]
	j := int(o & 0x7fffffff)
	if 8*(j+1) > len(large) {
		return 0, false
	}
	return binary.BigEndian.Uint64(large[8*j:]), true
}
