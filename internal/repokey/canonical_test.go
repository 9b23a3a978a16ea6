package repokey

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestOneKeyForEverySpellingOfARepository(t *testing.T) {
	for _, tc := range []struct{ url, key string }{
		{"https://github.com/Owner/R5.git", "github.com/owner/r5"},
		{"https://GITHUB.COM/owner/r5", "github.com/owner/r5"},
		{"https://gitee.com/caf\u00e9/x", "gitee.com/caf\u00e9/x"},                   // NFC
		{"https://gitee.com/cafe\u0301/x", "gitee.com/caf\u00e9/x"},                  // NFD becomes NFC
		{"https://gitee.com/CAF\u00c9/x", "gitee.com/caf\u00e9/x"},                   // folded
		{"https://gitee.com/stra\u00dfe/x", "gitee.com/strasse/x"},                   // full case folding
		{"https://gitee.com/\u03a3\u03bf\u03c2/x", "gitee.com/\u03c3\u03bf\u03c3/x"}, // final sigma folds
		{"https://gitee.com/src-openeuler/python-flufl.lock.git", "gitee.com/src-openeuler/python-flufl.lock"},
		{"https://example.org/~user/console", "example.org/~user/console"},
		{"https://example.org/a/com10", "example.org/a/com10"},
		{"https://example.org/a/lpt", "example.org/a/lpt"},
		{"https://example.org/a/%E4%B8%AD%E6%96%87", "example.org/a/\u4e2d\u6587"},
	} {
		key, _, err := Normalize(tc.url, Options{})
		if err != nil || key != tc.key {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.url, key, err, tc.key)
			continue
		}
		if err := Check(key); err != nil {
			t.Errorf("Check(%q): %v", key, err)
		}
	}
}

func TestTheFetchURLKeepsItsCase(t *testing.T) {
	_, fetch, err := Normalize("https://GitHub.com/Owner/Repo.git", Options{})
	if err != nil || fetch != "https://github.com/Owner/Repo.git" {
		t.Fatalf("fetch URL %q, %v", fetch, err)
	}
}

func TestAmbiguousOrUnsafeKeysAreRefused(t *testing.T) {
	for _, tc := range []struct{ path, why string }{
		{"a/b\u200bc", "zero-width space"},
		{"a/b\u200dc", "zero-width joiner"},
		{"a/\ufeffb", "byte order mark"},
		{"a/b\u202ec", "right-to-left override"},
		{"a/b\u2066c", "left-to-right isolate"},
		{"a/b\u00a0c", "no-break space"},
		{"a/b\u3000c", "ideographic space"},
		{"a\uff0fb", "fullwidth solidus"},
		{"a\u2215b", "division slash"},
		{"a\u2044b", "fraction slash"},
		{"a\u29f8b", "big solidus"},
		{"a\uff3cb", "fullwidth reverse solidus"},
		{"a/b\uff0e", "fullwidth full stop"},
		{"a/\uff41bc", "fullwidth letter"},
		{"a/b\ua789c", "modifier letter colon"},
		{"a/b\u0085c", "next line (C1 control)"},
		{"a/b\ue000c", "private use"},
		{"a/CON", "device name"},
		{"a/con.txt", "device name with an extension"},
		{"a/Nul", "device name in another case"},
		{"a/aux.tar.gz", "device name with extensions"},
		{"a/COM1", "COM1"},
		{"a/lpt9.x", "LPT9"},
		{"a/conin$", "CONIN$"},
		{"a/b.", "trailing dot"},
		{"a/b..", "trailing dots"},
		{"a.lock/b", "directory segment ending in .lock"},
		{"a/b<c", "<"},
		{"a/b|c", "|"},
		{"a/b*c", "*"},
		{"a/b\"c", "quote"},
		{"a/b%3Fc", "? through a percent-escape"},
		{"a/b%5Cc", "backslash through a percent-escape"},
		{"a/%FFb", "invalid UTF-8"},
	} {
		if key, _, err := Normalize("https://example.org/"+tc.path, Options{}); err == nil {
			t.Errorf("%s: %q accepted as %q", tc.why, tc.path, key)
		}
	}
}

func TestCanonicalMapsAGivenKeyAndCheckWantsItCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/Git/Git":      "github.com/git/git",
		"GitHub.com/a/b":          "github.com/a/b",
		"gitee.com/cafe\u0301/x":  "gitee.com/caf\u00e9/x",
		"127.0.0.1:8080/x/Y":      "127.0.0.1:8080/x/y",
		"[::1]:8080/a/b":          "[::1]:8080/a/b",
		"example.org/a/b.lock":    "example.org/a/b.lock",
		"example.org/~u/Console.": "",
		"example.org/a/CON":       "",
		"example.org/a/../b":      "",
		"example.org/a.git/b":     "",
		"example.org":             "",
	} {
		got, err := Canonical(in)
		if want == "" {
			if err == nil {
				t.Errorf("Canonical(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
		if err := Check(got); err != nil {
			t.Errorf("Check(%q): %v", got, err)
		}
		if in != want && Check(in) == nil {
			t.Errorf("Check(%q) accepts a key that is not canonical", in)
		}
	}
}

// FuzzCanonicalKey: the canonical form is idempotent, never holds what is
// refused, and two inputs that give one key give one directory.
func FuzzCanonicalKey(f *testing.F) {
	for _, s := range []string{"github.com/a/b", "github.com/A/B", "gitee.com/cafe\u0301/x", "gitee.com/stra\u00dfe/\u03a3",
		"example.org/a/con.txt", "example.org/a\uff0fb", "example.org/a/b\u200b", "example.org/x.lock/y", "h/\u0130stanbul",
		"h/\u212a", "h/\u1e9e", "h/\ufb01x", "[::1]:80/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := Canonical(in)
		if err != nil {
			return
		}
		again, err := Canonical(key)
		if err != nil || again != key {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, key, again, err)
		}
		if err := Check(key); err != nil {
			t.Fatalf("Check refuses the canonical %q: %v", key, err)
		}
		if !utf8.ValidString(key) || !norm.NFC.IsNormalString(key) {
			t.Fatalf("%q is not valid NFC", key)
		}
		_, path, _ := strings.Cut(key, "/")
		segs := strings.Split(path, "/")
		for i, seg := range segs {
			for _, r := range seg {
				if why := badRune(r); why != "" {
					t.Fatalf("%q holds %s", key, why)
				}
			}
			base, _, _ := strings.Cut(seg, ".")
			if strings.HasSuffix(seg, ".") || deviceName(base) || strings.HasSuffix(seg, ".git") ||
				seg == "" || seg[0] == '.' || seg[0] == '-' || (i < len(segs)-1 && strings.HasSuffix(seg, ".lock")) {
				t.Fatalf("%q has the refused segment %q", key, seg)
			}
		}
		// The directory a key maps to is the key: what a case-insensitive
		// or normalising file system would merge is already one key.
		if upper, err := Canonical(strings.ToUpper(key)); err == nil && upper != key {
			t.Fatalf("%q and its upper case %q are two keys", key, upper)
		}
		if nfd, err := Canonical(norm.NFD.String(key)); err == nil && nfd != key {
			t.Fatalf("%q and its NFD form give two keys (%q)", key, nfd)
		}
	})
}
