// Package intern keeps one shared copy of texts that many repositories
// repeat with only their own names changed, such as the error of a check:
// "git ls-remote https://host/a/b: network: ... 'https://host/a/b/' ...".
//
// Pack replaces each occurrence of the names it is given (a repository's
// URL, its key) by a marker and returns the one stored copy of the
// result; Unpack puts the names back. A fleet whose upstream host is down
// then keeps one text for all its repositories instead of one each.
package intern

import (
	"strings"
	"sync"
)

// marker begins every packed text and every name's place in it; a text
// with a NUL of its own (git's stderr is whatever the remote sent) has it
// replaced by U+FFFD first, so that Unpack cannot mistake it for a place.
const marker = "\x00"

// maxLen bounds the texts a table stores: a longer one is packed but not
// shared.
const maxLen = 4096

// Templates is a bounded table of packed texts, safe for concurrent use.
// When it is full it starts again empty: texts that vary at every check (a
// remote's own message, a port, a count) cannot fill it for good and stop
// the sharing of the next outage's texts; what holders of the old texts
// keep is theirs.
type Templates struct {
	mu  sync.Mutex
	m   map[string]string
	max int
}

// New returns a table that shares up to max texts at a time.
func New(max int) *Templates {
	return &Templates{m: map[string]string{}, max: max}
}

// Len reports how many texts the table shares.
func (t *Templates) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// Pack returns msg with every occurrence of names[i] replaced by the i-th
// place (names are tried in order, empty ones skipped; at most 9), as the
// table's shared copy when it has or can take one. Unpack with the same
// names gives msg back (with any NUL of msg replaced by U+FFFD).
func (t *Templates) Pack(msg string, names ...string) string {
	if msg == "" {
		return ""
	}
	msg = strings.ReplaceAll(msg, marker, "\uFFFD")
	var b strings.Builder
	b.WriteString(marker)
	rest := msg
	for rest != "" {
		at, which := -1, -1
		for i, n := range names[:min(len(names), 9)] {
			if n == "" {
				continue
			}
			if j := strings.Index(rest, n); j >= 0 && (at < 0 || j < at || j == at && len(n) > len(names[which])) {
				at, which = j, i
			}
		}
		if at < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:at])
		b.WriteString(marker)
		b.WriteByte(byte('1' + which))
		rest = rest[at+len(names[which]):]
	}
	packed := b.String()
	if len(packed) > maxLen {
		return packed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[packed]; ok {
		return s
	}
	if len(t.m) >= t.max {
		t.m = make(map[string]string, min(t.max, 1024))
	}
	t.m[packed] = packed
	return packed
}

// Unpack returns the text that Pack packed into packed with the same
// names. A text that Pack did not make is returned as it is.
func Unpack(packed string, names ...string) string {
	rest, ok := strings.CutPrefix(packed, marker)
	if !ok {
		return packed
	}
	var b strings.Builder
	for {
		i := strings.Index(rest, marker)
		if i < 0 || i+1 >= len(rest) {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		if w := int(rest[i+1] - '1'); w >= 0 && w < len(names) {
			b.WriteString(names[w])
		}
		rest = rest[i+2:]
	}
}
