package gitserve

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// checkAnswer reads an upload-pack answer (v0 or v2, with or without
// side-band) and checks the pack in it, if it has one: every object
// inflates whole to the size its header says (zlib's Adler-32 included),
// and the pack ends with the SHA-1 of its content. git's pack-objects
// copies a mirror's packed data to its client without a look, and its
// trailer sums the bytes it sent, so a byte rotten on the mirror's disk
// goes out in an answer that looks whole: only inflating each object, as
// the client's index-pack does, finds it. It neither resolves deltas nor
// hashes objects, which is what makes index-pack dearer (BenchmarkPackCache
// compares them). SHA-1 packs only: an object named by its base (a
// ref-delta) is read with a 20-byte name.
func checkAnswer(r io.Reader) error {
	d := &demux{r: bufio.NewReaderSize(r, 1<<16)}
	h := &heldHash{h: sha1.New()}
	br := bufio.NewReaderSize(io.TeeReader(d, h), 1<<16)
	if _, err := br.Peek(1); err == io.EOF {
		return d.err // an answer without a pack (a negotiation round)
	}
	if err := checkPackStream(br); err != nil {
		if d.err != nil {
			return d.err
		}
		return err
	}
	if n, _ := io.Copy(io.Discard, br); n != sha1.Size || d.err != nil {
		return errors.Join(fmt.Errorf("pack: %d bytes after its last object, want a %d-byte trailer", n, sha1.Size), d.err)
	}
	if !h.whole() {
		return errors.New("pack: its trailer is not the SHA-1 of its content")
	}
	return nil
}

// checkPackStream reads a pack's header and objects from br, up to its
// trailer.
func checkPackStream(br *bufio.Reader) error {
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || !bytes.Equal(hdr[:4], []byte("PACK")) {
		return errors.New("pack: no pack header")
	}
	n := uint32(hdr[8])<<24 | uint32(hdr[9])<<16 | uint32(hdr[10])<<8 | uint32(hdr[11])
	var zr io.ReadCloser
	off := int64(len(hdr))
	cr := &countingReader{r: br}
	for i := uint32(0); i < n; i++ {
		start := cr.n
		typ, size, err := objectHeader(cr)
		if err != nil {
			return fmt.Errorf("pack: object %d at offset %d: %w", i, off, err)
		}
		if zr == nil {
			zr, err = zlib.NewReader(cr)
		} else {
			err = zr.(zlib.Resetter).Reset(cr, nil)
		}
		if err == nil {
			var got int64
			got, err = io.Copy(io.Discard, zr)
			if err == nil && got != size {
				err = fmt.Errorf("inflates to %d bytes, its header says %d", got, size)
			}
		}
		if err != nil {
			return fmt.Errorf("pack: object %d (type %d) at offset %d: inflate: %w", i, typ, off, err)
		}
		off += cr.n - start
	}
	return nil
}

// objectHeader reads an object's type and size, and skips its delta base.
func objectHeader(r io.ByteReader) (typ byte, size int64, err error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ, size = (c>>4)&7, int64(c&15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, errors.New("size too large")
		}
		if c, err = r.ReadByte(); err != nil {
			return 0, 0, err
		}
		size |= int64(c&0x7f) << shift
	}
	skip := 0
	switch typ {
	case 1, 2, 3, 4: // commit, tree, blob, tag
	case 6: // offset delta: a varint
		for i := 0; ; i++ {
			if c, err = r.ReadByte(); err != nil {
				return 0, 0, err
			}
			if c&0x80 == 0 {
				break
			}
			if i > 8 {
				return 0, 0, errors.New("delta offset too large")
			}
		}
	case 7: // ref delta: the base's name
		skip = sha1.Size
	default:
		return 0, 0, fmt.Errorf("unknown object type %d", typ)
	}
	for ; skip > 0; skip-- {
		if _, err := r.ReadByte(); err != nil {
			return 0, 0, err
		}
	}
	return typ, size, nil
}

// countingReader counts the bytes read through it; its ReadByte makes
// zlib read no further than its stream's end.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// heldHash hashes what is written to it but its last 20 bytes, which
// whole then compares with the sum: a pack's trailer.
type heldHash struct {
	h    hash.Hash
	tail []byte
}

func (hh *heldHash) Write(p []byte) (int, error) {
	hh.tail = append(hh.tail, p...)
	if k := len(hh.tail) - sha1.Size; k > 0 {
		hh.h.Write(hh.tail[:k])
		hh.tail = append(hh.tail[:0], hh.tail[k:]...)
	}
	return len(p), nil
}

func (hh *heldHash) whole() bool {
	return len(hh.tail) == sha1.Size && bytes.Equal(hh.h.Sum(nil), hh.tail)
}

// demux reads the pack out of an upload-pack answer: the side-band's
// band 1, or, without side-band, the raw bytes after the last line. Every
// other line (acknowledgments, section headers, progress) is skipped; an
// error band or a malformed line ends it, with err set.
type demux struct {
	r       *bufio.Reader
	buf     []byte // pack bytes not read yet
	raw     bool   // the pack follows unframed to the end
	started bool   // pack bytes were seen
	done    bool
	err     error
}

func (d *demux) Read(p []byte) (int, error) {
	for len(d.buf) == 0 && !d.done {
		d.fill()
	}
	if len(d.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}

// fill reads the next line of the answer.
func (d *demux) fill() {
	if d.raw {
		b := make([]byte, 1<<16)
		n, err := d.r.Read(b)
		d.buf = b[:n]
		if err == io.EOF {
			d.done = true
		} else if err != nil {
			d.done, d.err = true, err
		}
		return
	}
	var head [4]byte
	if _, err := io.ReadFull(d.r, head[:]); err != nil {
		d.done = true
		if err != io.EOF {
			d.err = fmt.Errorf("answer: %w", err)
		}
		return
	}
	if string(head[:]) == "PACK" && !d.started {
		d.raw, d.started = true, true
		d.buf = append([]byte(nil), head[:]...)
		return
	}
	size, err := strconv.ParseUint(string(head[:]), 16, 16)
	switch {
	case err != nil || size == 3:
		d.done, d.err = true, fmt.Errorf("answer: malformed line length %q", head[:])
		return
	case size < 4: // flush, delimiter, response end: after the pack, its end
		d.done = d.started
		return
	}
	line := make([]byte, size-4)
	if _, err := io.ReadFull(d.r, line); err != nil {
		d.done, d.err = true, fmt.Errorf("answer: %w", err)
		return
	}
	switch {
	case len(line) > 0 && line[0] == 1:
		d.started = true
		d.buf = line[1:]
	case len(line) > 0 && line[0] == 3:
		d.done, d.err = true, fmt.Errorf("answer: git's error band: %q", line[1:])
	}
}

// packError tells the failure of an upload-pack that died reading the
// mirror's packs for what it is: damage, class bad objects, which the node
// hears of (OnFailure) and verifies the mirror for at once (a verification
// of a key at most once per ten minutes, whoever asks). git classifies
// some of these already ("... is corrupt"); these are the others that
// upload-pack and its pack-objects leave on its stderr when the
// repository's data, not the client, is at fault. Any other error, and
// one git already classified, is returned as it is.
func packError(err error) error {
	var ge *gitcmd.Error
	if err == nil || !errors.As(err, &ge) || ge.Class != gitcmd.ClassOther {
		return err // a timeout, git's memory bound: not damage
	}
	s := strings.ToLower(ge.Stderr)
	for _, sign := range []string{"inflate:", "unable to unpack", "possible repository corruption", "bad packed object",
		"packfile", "delta base offset", "pack-objects died"} {
		if strings.Contains(s, sign) {
			d := *ge
			d.Class = gitcmd.ClassBadObjects
			return &d
		}
	}
	return err
}
