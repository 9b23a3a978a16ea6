package mirror

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// checkPackCRCs reads every pack of a repository whole against its index:
// each object's bytes in the pack must match the CRC-32 that its (version
// 2) index records, the index must match its own checksum, and the pack's
// trailer the checksum that the index names. That is what finds bit rot
// inside an object's compressed data, which git serves as it is without a
// look (pack-objects copies packed data to a client unchecked) and which
// the walk of rev-list never reads for a blob. It costs a read of the
// packs and a CRC-32 of each byte: far less than git verify-pack or git
// fsck, which inflate and hash every object (BenchmarkVerify). It returns
// what is wrong ("" when every pack is whole), or an error when the files
// could not be read at all.
func checkPackCRCs(repo string) (string, error) {
	dir := filepath.Join(repo, "objects", "pack")
	names, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, d := range names {
		if !strings.HasSuffix(d.Name(), ".pack") || d.IsDir() {
			continue
		}
		base := strings.TrimSuffix(d.Name(), ".pack")
		bad, err := checkPackCRC(filepath.Join(dir, base+".idx"), filepath.Join(dir, d.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile (scanObjects saw it whole before)
		}
		if err != nil {
			return "", err
		}
		if bad != "" {
			return "objects/pack/" + d.Name() + ": " + bad, nil
		}
	}
	return "", nil
}

// packIndex is what checkPackCRC needs of a pack's index.
type packIndex struct {
	hashSize int
	entries  []packObject // in the order of their offsets
	packSum  []byte       // the pack's trailer, as the index records it
}

type packObject struct {
	off uint64
	crc uint32
}

// checkPackCRC checks one pack against its index (see checkPackCRCs).
func checkPackCRC(idxPath, packPath string) (string, error) {
	raw, err := os.ReadFile(idxPath)
	if err != nil {
		return "", err
	}
	idx, bad := parsePackIndex(raw)
	if bad != "" {
		return "index: " + bad, nil
	}
	f, err := os.Open(packPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	return checkPackObjects(bufio.NewReaderSize(f, 1<<16), fi.Size(), idx), nil
}

// parsePackIndex reads a version 2 pack index (SHA-1 or SHA-256 names),
// checking its own trailing checksum. It returns what is wrong, or "".
func parsePackIndex(raw []byte) (packIndex, string) {
	const head = 8 + 256*4
	if len(raw) < head || !bytes.Equal(raw[:4], []byte("\xfftOc")) || binary.BigEndian.Uint32(raw[4:8]) != 2 {
		return packIndex{}, "not a version 2 pack index"
	}
	n := int(binary.BigEndian.Uint32(raw[head-4 : head]))
	for _, hs := range []int{sha1.Size, sha256.Size} {
		crcs := head + n*hs
		offs := crcs + 4*n
		large := offs + 4*n
		if large+2*hs > len(raw) {
			continue
		}
		nLarge := 0
		for i := range n {
			if binary.BigEndian.Uint32(raw[offs+4*i:])&0x80000000 != 0 {
				nLarge++
			}
		}
		end := large + 8*nLarge
		if end+2*hs != len(raw) {
			continue
		}
		var h hash.Hash = sha1.New()
		if hs == sha256.Size {
			h = sha256.New()
		}
		h.Write(raw[:end+hs])
		if !bytes.Equal(h.Sum(nil), raw[end+hs:]) {
			return packIndex{}, "its checksum does not match its content"
		}
		idx := packIndex{hashSize: hs, entries: make([]packObject, n), packSum: raw[end : end+hs]}
		for i := range n {
			off := uint64(binary.BigEndian.Uint32(raw[offs+4*i:]))
			if off&0x80000000 != 0 {
				off = binary.BigEndian.Uint64(raw[large+8*int(off&0x7fffffff):])
			}
			idx.entries[i] = packObject{off: off, crc: binary.BigEndian.Uint32(raw[crcs+4*i:])}
		}
		slices.SortFunc(idx.entries, func(a, b packObject) int {
			switch {
			case a.off < b.off:
				return -1
			case a.off > b.off:
				return 1
			}
			return 0
		})
		return idx, ""
	}
	return packIndex{}, "its size does not fit its object count"
}

// checkPackObjects reads a pack of size bytes from r and compares it with
// idx: its header, each object's CRC-32 and its trailer. It returns what
// is wrong, or "".
func checkPackObjects(r io.Reader, size int64, idx packIndex) string {
	hs := int64(idx.hashSize)
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "shorter than a pack header"
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) || binary.BigEndian.Uint32(hdr[8:]) != uint32(len(idx.entries)) {
		return "its header does not match its index"
	}
	pos := int64(len(hdr))
	crc := crc32.NewIEEE()
	for i, e := range idx.entries {
		end := size - hs
		if i+1 < len(idx.entries) {
			end = int64(idx.entries[i+1].off)
		}
		if int64(e.off) != pos || end <= pos || end > size-hs {
			return fmt.Sprintf("the object at offset %d is not where its index says", e.off)
		}
		crc.Reset()
		if _, err := io.CopyN(crc, r, end-pos); err != nil {
			return fmt.Sprintf("truncated at the object at offset %d", e.off)
		}
		if crc.Sum32() != e.crc {
			return fmt.Sprintf("the object at offset %d fails its CRC", e.off)
		}
		pos = end
	}
	sum := make([]byte, hs)
	if _, err := io.ReadFull(r, sum); err != nil || !bytes.Equal(sum, idx.packSum) {
		return "its trailer does not match its index"
	}
	return ""
}
