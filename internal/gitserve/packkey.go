package gitserve

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// packKey names the answer to an upload-pack fetch request: two requests
// with one key get the same pack. It covers the repository (its directory
// and the state of its refs), the Git-Protocol header and the request body
// without what does not change the answer (the client's agent and session
// id, the framing of its lines).
func packKey(dir, gitProtocol string, state []byte, body []byte, v2 bool) (string, error) {
	pkts, err := pktLines(body)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "gitserve pack 1\x00%s\x00%s\x00%x\x00", dir, gitProtocol, state)
	for i, p := range pkts {
		if len(p) == 4 && p[:3] == "000" { // flush, delimiter, response end
			h.Write([]byte(p))
			continue
		}
		switch {
		case v2 && (strings.HasPrefix(p, "agent=") || strings.HasPrefix(p, "session-id=")):
			continue // a capability line before the arguments: upload-pack only logs it
		case !v2 && i == 0:
			p = dropTokens(p, "agent=", "session-id=") // v0 sends them after the first want
		}
		h.Write([]byte(pktLine(p + "\n")))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dropTokens removes the space-separated words of line that start with one
// of the prefixes.
func dropTokens(line string, prefixes ...string) string {
	words := strings.Split(line, " ")
	kept := words[:0]
	for _, w := range words {
		drop := false
		for _, p := range prefixes {
			drop = drop || strings.HasPrefix(w, p)
		}
		if !drop {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}

// refsState is a digest of what of a bare repository, besides the request,
// decides upload-pack's answer: its refs (packed and loose), HEAD and its
// shallow file. Objects need no look: an object's id names its content,
// and what is reachable and served is decided by the refs. It reads files
// rather than start a git process; a ref moving while it reads gives a
// digest of neither state, which only misses the cache.
func refsState(dir string) ([]byte, error) {
	h := sha256.New()
	for _, name := range []string{"HEAD", "packed-refs", "shallow"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("reading the refs of %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	refs := filepath.Join(dir, "refs")
	err := filepath.WalkDir(refs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a ref deleted while we read
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(path, ".lock") {
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path[len(refs):], len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the refs of %s: %w", dir, err)
	}
	return h.Sum(nil), nil
}
