package repokey

import (
	"errors"
	"fmt"
	"strings"
)

// The canonical form of a key's path, the one rule that the coordinator,
// the catalog, the API, the webhooks and the mirror share through
// Normalize, Folding.Canonical and Check:
//
//   - Characters: ASCII letters, digits and `. _ - + ~` only. Anything
//     else, in particular any non-ASCII character (look-alikes of letters
//     and slashes, the Kelvin sign, ß, ligatures, invisible characters) and
//     any percent-escape, is refused, not normalised: a name that needs one
//     is not a repository name on any forge that gitfleet mirrors.
//   - Case: kept, except on hosts whose paths are case-insensitive
//     (github.com, gitee.com and the hosts an operator names: see
//     Folding), where the path is lower-cased. On GitLab, Gitea, cgit and
//     plain git servers `u/Case` and `u/case` are two repositories, and so
//     two keys.
//   - Segments refused: empty, ".", "..", starting with "." or "-", ending
//     in "." or ".git" (in any case), longer than MaxSegmentLen bytes,
//     Windows device names (CON, PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$,
//     CONOUT$, in any case, with or without an extension), NTFS short names
//     ("~" followed by a digit, as in GIT~1), and a directory segment (any
//     but the last) ending in ".lock". The last segment may end in ".lock":
//     on disk it becomes "<name>.lock.git", and real repositories have
//     such names.
//
// On disk, a key's upper-case letters are escaped (see Key.Dir), so that keys
// that differ only in case stay apart on a case-insensitive file system.

// MaxSegmentLen bounds one segment of a key's path, in bytes.
const MaxSegmentLen = 200

// maxDirSegmentLen bounds a segment's directory name (Key.Dir), so that with
// ".lock.git" after it, it stays within the 255 bytes of a file name.
const maxDirSegmentLen = 245

// pathChar tells which bytes may appear in a key's path segment.
var pathChar = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "._-+~" {
		t[c] = true
	}
	return t
}()

// foldedByDefault are the hosts known to treat repository paths without
// regard to case: `github.com/Git/Git` is `github.com/git/git`.
var foldedByDefault = map[string]bool{"github.com": true, "gitee.com": true}

// Folding says on which hosts a key's path is case-insensitive, and so
// lower-cased: github.com and gitee.com always, and the hosts an operator
// names (`--case-insensitive-host`). The zero value has the defaults only.
type Folding struct {
	extra map[string]bool
}

// NewFolding returns the defaults plus hosts, each written as in a key
// (lower case, with its port when it is not the scheme's default).
func NewFolding(hosts []string) (Folding, error) {
	f := Folding{extra: make(map[string]bool, len(hosts))}
	for _, h := range hosts {
		if !validKeyHost(h) {
			return Folding{}, fmt.Errorf("%w: case-insensitive host %q: want a lower-case host[:port] as in a key", ErrInvalid, h)
		}
		f.extra[h] = true
	}
	return f, nil
}

// Folds tells whether paths on host (as in a key, with its port) are
// case-insensitive.
func (f Folding) Folds(host string) bool { return foldedByDefault[host] || f.extra[host] }

// Hosts lists the hosts that fold case, the defaults first.
func (f Folding) Hosts() []string {
	out := []string{"github.com", "gitee.com"}
	for h := range f.extra {
		if !foldedByDefault[h] {
			out = append(out, h)
		}
	}
	return out
}

// canonicalSegment returns seg in canonical form, or why it is refused.
// last is whether seg is the key's last segment; fold, whether its host
// folds case.
func canonicalSegment(seg string, last, fold bool) (string, error) {
	switch {
	case seg == "":
		return "", errors.New("empty segment")
	case seg == "." || seg == "..":
		return "", errors.New("'.' or '..' segment")
	case len(seg) > MaxSegmentLen:
		return "", fmt.Errorf("segment longer than %d bytes", MaxSegmentLen)
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !pathChar[c] {
			if c >= 0x80 {
				return "", fmt.Errorf("segment %q has a non-ASCII character (only letters, digits and . _ - + ~ are allowed)", truncate(seg))
			}
			return "", fmt.Errorf("segment %q has the forbidden character %q", truncate(seg), c)
		}
		if c == '~' && i+1 < len(seg) && seg[i+1] >= '0' && seg[i+1] <= '9' {
			return "", fmt.Errorf("segment %q looks like an NTFS short name (~ and a digit)", truncate(seg))
		}
	}
	if fold {
		seg = strings.ToLower(seg)
	} else if n := len(seg) + strings.Count(Key(seg).Dir(), "!"); n > maxDirSegmentLen {
		return "", fmt.Errorf("segment %q is %d bytes on disk with its upper case escaped, over %d", truncate(seg), n, maxDirSegmentLen)
	}
	lower := strings.ToLower(seg)
	base, _, _ := strings.Cut(lower, ".")
	switch {
	case seg[0] == '.':
		return "", fmt.Errorf("segment %q starts with '.'", seg)
	case seg[0] == '-':
		return "", fmt.Errorf("segment %q starts with '-'", seg)
	case strings.HasSuffix(lower, ".git"):
		// ".git" would let one key's directory sit inside another's.
		return "", fmt.Errorf("segment %q ends in .git", seg)
	case strings.HasSuffix(seg, "."):
		return "", fmt.Errorf("segment %q ends in '.'", seg)
	case !last && strings.HasSuffix(lower, ".lock"):
		return "", fmt.Errorf("directory segment %q ends in .lock", seg)
	case deviceName(base):
		return "", fmt.Errorf("segment %q is a Windows device name", seg)
	}
	return seg, nil
}

// deviceName tells whether base (lower case, without extension) is a
// Windows device name.
func deviceName(base string) bool {
	switch base {
	case "con", "prn", "aux", "nul", "conin$", "conout$":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "com") || strings.HasPrefix(base, "lpt")) {
		return base[3] >= '0' && base[3] <= '9'
	}
	return false
}

// canonicalPath returns path (segments separated by "/") in canonical
// form, or why it is refused.
func canonicalPath(path string, fold bool) (string, error) {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		c, err := canonicalSegment(seg, i == len(segs)-1, fold)
		if err != nil {
			return "", err
		}
		segs[i] = c
	}
	return strings.Join(segs, "/"), nil
}

// Canonical parses a key as a person or a forge writes it (an HTTP path, a
// webhook's or a forge API's repository name) into its canonical form, or
// returns an error wrapping ErrInvalid: the host is lower-cased, and so is
// the path on a host that folds case (`github.com/Git/Git` is
// `github.com/git/git`); anything that Normalize could not have produced
// is refused. What it returns passes Check, under any Folding.
func (f Folding) Canonical(key string) (Key, error) {
	if key == "" || len(key) > MaxKeyLen {
		return "", fmt.Errorf("%w: key %q: empty or too long", ErrInvalid, truncate(key))
	}
	host, path, ok := strings.Cut(key, "/")
	if !ok || host == "" || path == "" {
		return "", fmt.Errorf("%w: key %q: want host/path", ErrInvalid, truncate(key))
	}
	host = strings.ToLower(host)
	if !validKeyHost(host) {
		return "", fmt.Errorf("%w: key %q: bad host", ErrInvalid, truncate(key))
	}
	path, err := canonicalPath(path, f.Folds(host))
	if err != nil {
		return "", fmt.Errorf("%w: key %q: %v", ErrInvalid, truncate(key), err)
	}
	return Key(host + "/" + path), nil
}

// Check validates a key given directly (from a peer, a store or a
// directory): it must be in the form Normalize produces, so that it cannot
// escape a directory nor name another key's directory. A key's case is
// checked against the default folding only: on a host an operator named,
// upper case is a spelling Check cannot tell from another key.
func Check(key string) error {
	c, err := Folding{}.Canonical(key)
	if err != nil {
		return err
	}
	if string(c) != key {
		return fmt.Errorf("%w: key %q is not in canonical form (%q)", ErrInvalid, truncate(key), truncate(string(c)))
	}
	return nil
}

// KeyOfDir returns the key whose Dir is dir, or an error when dir is not
// one (an upper-case letter or a "!" not followed by a lower-case letter: a
// directory of another layout, or not gitfleet's) or when what it spells
// is not a valid key (Check).
func KeyOfDir(dir string) (Key, error) {
	key, err := unescapeDir(dir)
	if err != nil {
		return "", err
	}
	return Parse(key)
}

// unescapeDir reverses Key.Dir.
func unescapeDir(dir string) (string, error) {
	if !strings.Contains(dir, "!") {
		for i := 0; i < len(dir); i++ {
			if c := dir[i]; c >= 'A' && c <= 'Z' {
				return "", fmt.Errorf("%w: directory %q has an unescaped upper-case letter", ErrInvalid, truncate(dir))
			}
		}
		return dir, nil
	}
	var b strings.Builder
	b.Grow(len(dir))
	for i := 0; i < len(dir); i++ {
		c := dir[i]
		switch {
		case c >= 'A' && c <= 'Z':
			return "", fmt.Errorf("%w: directory %q has an unescaped upper-case letter", ErrInvalid, truncate(dir))
		case c != '!':
			b.WriteByte(c)
		case i+1 < len(dir) && dir[i+1] >= 'a' && dir[i+1] <= 'z':
			i++
			b.WriteByte(dir[i] - 'a' + 'A')
		default:
			return "", fmt.Errorf("%w: directory %q has a '!' not followed by a lower-case letter", ErrInvalid, truncate(dir))
		}
	}
	return b.String(), nil
}

// SameRepository tells whether key names the repository whose key is
// Normalize's want: the same key, or its lower case, which a coordinator
// gives when its operator named the host case-insensitive and this node's
// did not.
func SameRepository(want, key string) bool {
	return want == key || want != "" && strings.ToLower(want) == key
}
