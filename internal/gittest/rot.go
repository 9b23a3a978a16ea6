package gittest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RotPack plays a disk's bit rot on the repository at gitDir: it
// overwrites 64 bytes in the middle of the compressed data of the largest
// whole (not delta) blob of its packs, with each byte changed, and
// returns the pack's path and the blob. Git still walks the repository
// (rev-list never reads a blob) and upload-pack copies the bytes to a
// client as they are: the client's index-pack is the first to fail. The
// blob must be at least 256 bytes on disk (AddBlob makes one).
func RotPack(gitDir string) (pack, blob string, err error) {
	idxs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.idx"))
	if len(idxs) == 0 {
		return "", "", errors.New("rot: no pack in " + gitDir)
	}
	var off, disk int64
	for _, idx := range idxs {
		out, err := Output("", "--git-dir="+gitDir, "verify-pack", "-v", idx)
		if err != nil {
			return "", "", fmt.Errorf("rot: %w", err)
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) != 5 || f[1] != "blob" { // a delta has its depth and base after
				continue
			}
			d, _ := strconv.ParseInt(f[3], 10, 64)
			o, _ := strconv.ParseInt(f[4], 10, 64)
			if d > disk {
				pack, blob, disk, off = strings.TrimSuffix(idx, ".idx")+".pack", f[0], d, o
			}
		}
	}
	if disk < 256 {
		return "", "", fmt.Errorf("rot: no whole blob of 256 bytes or more in %s", gitDir)
	}
	if err := os.Chmod(pack, 0o644); err != nil {
		return "", "", err
	}
	f, err := os.OpenFile(pack, os.O_RDWR, 0)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	at := off + disk/2 - 32
	b := make([]byte, 64)
	if _, err := f.ReadAt(b, at); err != nil {
		return "", "", err
	}
	for i := range b {
		b[i] ^= 0x5a
	}
	if _, err := f.WriteAt(b, at); err != nil {
		return "", "", err
	}
	return pack, blob, f.Close()
}
