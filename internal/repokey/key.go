package repokey

import (
	"log/slog"
	"strings"
)

// Key is a repository key known to be valid: in the form Normalize gives
// (see canonical.go), so that it cannot escape a data directory nor name
// another key's directory. Only this package makes one, through the
// parsers at the edges:
//
//   - Normalize: an upstream URL (a catalog's entry, an API call's or a
//     webhook's URL), and Batch, its fast path for a catalog file's lines,
//     whose keys share one string;
//   - Parse: a key received as it is written (from a peer in proto, a
//     store), checked as strictly as Check;
//   - Folding.Canonical: a key as a person or a forge writes it (an HTTP
//     path, a webhook's repository name), mapped to its canonical form;
//   - KeyOfDir: a mirror's directory on disk.
//
// Inside, a Key is trusted and not validated again: code that holds one
// takes its word. A conversion Key(s) from an unchecked string outside
// this package would break that promise, and a test
// (TestNoKeyIsMadeFromAnUncheckedString) keeps it out of the tree; tests
// may write keys as constants.
//
// A Key costs what a string costs: it is one.
type Key string

// Parse validates a key given as it is written (from the wire, an HTTP
// path, a store) and returns it as a Key: it must be in the canonical form
// Normalize produces (see Check); nothing is folded or mended.
func Parse(s string) (Key, error) {
	if err := Check(s); err != nil {
		return "", err
	}
	return Key(s), nil
}

// String returns the key as it is written (on the wire, in logs, in URLs).
func (k Key) String() string { return string(k) }

// Host returns the host part of the key (with port), for per-host limits.
func (k Key) Host() string { return Host(string(k)) }

// Dir returns the relative directory (with "/" separators, without the
// ".git" suffix) that holds the key's mirror: the key with each upper-case
// letter written as "!" and the letter in lower case, so that keys that
// differ only in case stay apart on a case-insensitive file system
// (macOS, Windows). A key without upper case is its own directory.
// KeyOfDir reverses it.
func (k Key) Dir() string {
	key := string(k)
	n := 0
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 'A' && c <= 'Z' {
			n++
		}
	}
	if n == 0 {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + n)
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 'A' && c <= 'Z' {
			b.WriteByte('!')
			b.WriteByte(c + 'a' - 'A')
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// LogValue logs the key as the string it is, so that a Key in a log
// record reads as a bare key did.
func (k Key) LogValue() slog.Value { return slog.StringValue(string(k)) }

// Clone returns a copy of the key that shares no memory with k: a key cut
// from a Batch keeps the whole batch's string alive, which a key kept on
// its own should not.
func (k Key) Clone() Key { return Key(strings.Clone(string(k))) }
