package repokey

import (
	"bytes"

	"github.com/gitfleet/gitfleet/internal/egress"
)

// Batch makes the keys of many URLs (a catalog file's lines) in one shared
// string, the way a catalog of a million entries can afford: one
// allocation for all the keys of a file, and for the lines in the form
// "https://host/path" (nearly all of a big catalog) no URL parsing at all.
// Only the parsers of this package write into it, so that every Key it
// hands out is one Normalize gave or would give. The zero value is ready;
// a Batch is reused from one file to the next (Keys empties it).
type Batch struct {
	buf  []byte
	ends []int
}

// AddFast adds the key of line when line is in the one form the fast path
// knows ("https://host/path", see fastKey) and returns how many bytes of
// the line after "https://" the key is: the fetch URL is line itself. When
// ok is false, nothing was added: ask Normalize and Add its key.
func (b *Batch) AddFast(line []byte) (n int, ok bool) {
	if n, ok = fastKey(line); ok {
		b.buf = append(b.buf, line[len("https://"):len("https://")+n]...)
		b.ends = append(b.ends, len(b.buf))
	}
	return n, ok
}

// Add adds a key that a parser made.
func (b *Batch) Add(k Key) {
	b.buf = append(b.buf, k...)
	b.ends = append(b.ends, len(b.buf))
}

// Keys calls fn with each key added, in order, all of them sharing one
// string, and empties the batch for the next file (keeping its memory).
func (b *Batch) Keys(fn func(i int, k Key)) {
	all := string(b.buf)
	start := 0
	for i, end := range b.ends {
		fn(i, Key(all[start:end]))
		start = end
	}
	b.buf, b.ends = b.buf[:0], b.ends[:0]
}

// fastKey is Normalize for the one form that makes up nearly all of
// a big catalog, "https://host/path", without parsing or allocating: at a
// million lines, Normalize (url.Parse and its garbage) would be most of a
// load. It accepts only what it can prove Normalize accepts with the same
// result, and then returns the key's length: the key is line[8:8+n] and
// the fetch URL is the line itself. Anything else (a port, upper case, an
// IP address, percent-escapes, another scheme...) returns
// false, and the caller asks Normalize. TestFastKeyAgreesWithNormalize and
// FuzzFastKey hold it to that.
func fastKey(line []byte) (n int, ok bool) {
	const scheme = "https://"
	if len(line) <= len(scheme) || string(line[:len(scheme)]) != scheme {
		return 0, false
	}
	rest := line[len(scheme):]
	slash, letter := -1, false
	for i, c := range rest {
		if k := keyChars[c]; k == lower {
			letter = true
		} else if k != digitDotDash {
			if c == '/' {
				slash = i
			}
			break
		}
	}
	// A letter rules out an IP address; localhost is left to Normalize,
	// which knows whether private hosts are allowed.
	if slash <= 0 || slash > 253 || !letter || rest[0] == '-' || rest[0] == '.' {
		return 0, false
	}
	// A name the egress policy might refuse by its spelling is left to
	// Normalize too: a single label, a last label that does not start with
	// a letter (what could be an IPv4 address), a local-only name.
	if !fastHost(rest[:slash]) {
		return 0, false
	}
	// The path as Normalize trims it: trailing slashes, one ".git",
	// trailing slashes, then the leading slash. The key is rest[:end].
	end := len(rest)
	for end > slash && rest[end-1] == '/' {
		end--
	}
	if end-slash >= len(".git") && string(rest[end-len(".git"):end]) == ".git" {
		end -= len(".git")
	}
	for end > slash && rest[end-1] == '/' {
		end--
	}
	if end <= slash+1 || end > MaxKeyLen {
		return 0, false
	}
	// What was trimmed is slashes and ".git"; check the rest, segment by
	// segment, as Normalize does.
	seg := slash + 1
	for i := seg; i <= end; i++ {
		if i < end && rest[i] != '/' {
			if keyChars[rest[i]] == 0 {
				return 0, false
			}
			continue
		}
		if !fastSegment(rest[seg:i]) {
			return 0, false
		}
		seg = i + 1
	}
	return end, true
}

// fastHost accepts a host (lower-case letters, digits, dots and dashes)
// that the egress policy accepts by its spelling: two labels or more, each
// of 1 to 63 characters with no dash at either end, the last starting with
// a letter (so that it cannot be read as an IPv4 address), not local-only.
func fastHost(host []byte) bool {
	dots, start := 0, 0
	for i := 0; i <= len(host); i++ {
		if i < len(host) && host[i] != '.' {
			continue
		}
		label := host[start:i]
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		if i == len(host) && keyChars[label[0]] != lower {
			return false
		}
		if i < len(host) {
			dots++
		}
		start = i + 1
	}
	return dots > 0 && !egress.LocalOnlyName(host)
}

func fastSegment(s []byte) bool {
	if len(s) == 0 || len(s) > MaxSegmentLen || s[0] == '.' || s[0] == '-' || s[len(s)-1] == '.' {
		return false
	}
	// NTFS short names (GIT~1) are Normalize's to refuse.
	if i := bytes.IndexByte(s, '~'); i >= 0 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' || bytes.Count(s, []byte{'~'}) > 1 {
		return false
	}
	if bytes.HasSuffix(s, []byte(".git")) || bytes.HasSuffix(s, []byte(".lock")) {
		return false
	}
	// Windows device names, with or without an extension, are Normalize's
	// to refuse.
	base := s
	if i := bytes.IndexByte(s, '.'); i >= 0 {
		base = s[:i]
	}
	switch string(base) {
	case "con", "prn", "aux", "nul":
		return false
	}
	if len(base) == 4 && (string(base[:3]) == "com" || string(base[:3]) == "lpt") && base[3] >= '0' && base[3] <= '9' {
		return false
	}
	return true
}

// Character classes of fastKey: a host is lower-case letters, digits, dots
// and dashes; a path may also have "_", "~" and "/". Upper case is left to
// Normalize, which folds it.
const (
	pathOnly     = 1
	digitDotDash = 2
	lower        = 3
)

var keyChars = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = lower
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = digitDotDash
	}
	t['.'], t['-'] = digitDotDash, digitDotDash
	t['_'], t['~'], t['/'] = pathOnly, pathOnly, pathOnly
	return t
}()
