package repokey

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// The canonical form of a key's path, the one rule that the coordinator,
// the catalog, the API, the webhooks and the mirror share through
// Normalize, Canonical and Check:
//
//   - Unicode NFC, then case-folded (lower case for ASCII; ß becomes ss),
//     then NFC again: two spellings that a case-insensitive or normalising
//     file system would confuse are one key. The fetch URL keeps its case.
//   - Refused: invalid UTF-8; control, format (zero-width, bidirectional),
//     space, private-use and surrogate characters; non-ASCII characters
//     whose compatibility form contains ASCII (fullwidth, superscript and
//     other look-alikes of "/", ".", ":" or letters) and look-alike slashes
//     and colons that have no such form; letters whose upper case folds to
//     another letter (the dotless ı) or whose folding is not stable
//     (Cherokee); `\ : < > " | ? *`.
//   - Segments refused: empty, ".", "..", starting with "." or "-", ending
//     in "." or ".git", longer than 255 bytes, Windows device names (CON,
//     PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$, CONOUT$, with or without an
//     extension), and a directory segment (any but the last) ending in
//     ".lock". The last segment may end in ".lock": on disk it becomes
//     "<name>.lock.git", and real repositories have such names.

// lookAlikes are characters that look like a path separator or a colon but
// have no compatibility form that says so.
var lookAlikes = map[rune]bool{
	'\u2215': true, // DIVISION SLASH
	'\u2044': true, // FRACTION SLASH
	'\u29F8': true, // BIG SOLIDUS
	'\u29F9': true, // BIG REVERSE SOLIDUS
	'\u2216': true, // SET MINUS
	'\u2571': true, // BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
	'\u2572': true, // BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
	'\u27CB': true, // MATHEMATICAL RISING DIAGONAL
	'\u27CD': true, // MATHEMATICAL FALLING DIAGONAL
	'\u1735': true, // PHILIPPINE SINGLE PUNCTUATION
	'\u0337': true, // COMBINING SHORT SOLIDUS OVERLAY
	'\u0338': true, // COMBINING LONG SOLIDUS OVERLAY
	'\u3033': true, // VERTICAL KANA REPEAT MARK UPPER HALF
	'\u2236': true, // RATIO
	'\uA789': true, // MODIFIER LETTER COLON
	'\u02D0': true, // MODIFIER LETTER TRIANGULAR COLON
	'\u0589': true, // ARMENIAN FULL STOP
	'\u05C3': true, // HEBREW PUNCTUATION SOF PASUQ
}

// badRune tells why r may not appear in a key, or "" when it may.
func badRune(r rune) string {
	switch {
	case r < 0x80:
		if r < 0x21 || r == 0x7f {
			return "a space or control character"
		}
		if strings.ContainsRune(`\:<>"|?*`, r) {
			return fmt.Sprintf("%q", r)
		}
		return ""
	case r == utf8.RuneError:
		return "invalid UTF-8"
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zs, unicode.Zl, unicode.Zp):
		return fmt.Sprintf("the invisible or control character %U", r)
	case lookAlikes[r]:
		return fmt.Sprintf("the look-alike character %U", r)
	}
	for _, c := range norm.NFKC.String(string(r)) {
		if c < 0x80 {
			return fmt.Sprintf("the look-alike character %U (like %q)", r, c)
		}
	}
	// A letter whose upper case folds to another letter (the dotless ı,
	// whose upper case is I), or whose folding is not stable (a Cherokee
	// letter folds to the other case and back), would make two spellings
	// of one name two keys.
	fold := func(s string) string { return norm.NFC.String(cases.Fold().String(s)) }
	if f := fold(string(r)); fold(strings.ToUpper(string(r))) != f || fold(f) != f {
		return fmt.Sprintf("the character %U, whose case has no one form", r)
	}
	return ""
}

// canonicalSegment returns seg in canonical form, or why it is refused.
// last is whether seg is the key's last segment.
func canonicalSegment(seg string, last bool) (string, error) {
	if !utf8.ValidString(seg) {
		return "", errors.New("invalid UTF-8")
	}
	if !isASCIILower(seg) {
		seg = norm.NFC.String(cases.Fold().String(norm.NFC.String(seg)))
	}
	for _, r := range seg {
		if why := badRune(r); why != "" {
			return "", fmt.Errorf("segment %q has %s", truncate(seg), why)
		}
	}
	if err := checkSegment(seg); err != nil {
		return "", err
	}
	base, _, _ := strings.Cut(seg, ".")
	switch {
	case strings.HasSuffix(seg, "."):
		return "", fmt.Errorf("segment %q ends in '.'", seg)
	case !last && strings.HasSuffix(seg, ".lock"):
		return "", fmt.Errorf("directory segment %q ends in .lock", seg)
	case deviceName(base):
		return "", fmt.Errorf("segment %q is a Windows device name", seg)
	}
	return seg, nil
}

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

// isASCIILower tells whether s is ASCII without upper case: then it is
// already canonical, and the Unicode work is skipped.
func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// canonicalPath returns path (segments separated by "/") in canonical
// form, or why it is refused.
func canonicalPath(path string) (string, error) {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		c, err := canonicalSegment(seg, i == len(segs)-1)
		if err != nil {
			return "", err
		}
		segs[i] = c
	}
	return strings.Join(segs, "/"), nil
}

// Canonical returns the canonical form of a key given directly (from an
// HTTP path, a peer or a store), or an error wrapping ErrInvalid: upper
// case and other spellings of a key become the key, and anything that
// Normalize could not have produced is refused.
func Canonical(key string) (string, error) {
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
	path, err := canonicalPath(path)
	if err != nil {
		return "", fmt.Errorf("%w: key %q: %v", ErrInvalid, truncate(key), err)
	}
	key = host + "/" + path
	if len(key) > MaxKeyLen {
		return "", fmt.Errorf("%w: key %q: longer than %d bytes", ErrInvalid, truncate(key), MaxKeyLen)
	}
	return key, nil
}
