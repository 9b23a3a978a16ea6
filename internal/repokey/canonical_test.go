package repokey

import (
	"strings"
	"testing"
)

func TestOneKeyForEverySpellingOfARepository(t *testing.T) {
	for _, tc := range []struct{ url, key string }{
		{"https://github.com/Owner/R5.git", "github.com/owner/r5"},
		{"https://GITHUB.COM/owner/r5", "github.com/owner/r5"},
		{"https://Gitee.com/CAFE/X", "gitee.com/cafe/x"},                      // gitee.com folds case
		{"https://gitlab.com/U/Case.git", "gitlab.com/U/Case"},                // gitlab.com keeps it
		{"http://git.example.org:8080/u/Case", "git.example.org:8080/u/Case"}, // so does any other host
		{"https://aur.archlinux.org/aewm++.git", "aur.archlinux.org/aewm++"},
		{"https://git.sr.ht/~sircmpwn/hare", "git.sr.ht/~sircmpwn/hare"},
		{"https://gitee.com/src-openeuler/python-flufl.lock.git", "gitee.com/src-openeuler/python-flufl.lock"},
		{"https://example.org/~user/console", "example.org/~user/console"},
		{"https://example.org/a/com10", "example.org/a/com10"},
		{"https://example.org/a/lpt", "example.org/a/lpt"},
	} {
		key, _, err := Normalize(tc.url, Options{})
		if err != nil || key.String() != tc.key {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.url, key, err, tc.key)
			continue
		}
		if err := Check(key.String()); err != nil {
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
		{"u%2fa", "slash through a percent-escape"},
		{"u%2Fa", "slash through an upper-case percent-escape"},
		{"u/%2e%2e/x", "'..' through percent-escapes"},
		{"u/a%00b", "NUL through a percent-escape"},
		{"u/%41", "any percent-escape"},
		{"a/\u043e", "Cyrillic look-alike"},
		{"a/stra\u00dfe", "sharp s"},
		{"a/\u212a", "Kelvin sign"},
		{"a/\ufb01x", "ligature"},
		{"a/\u4e2d\u6587", "non-ASCII letters"},
		{"a/GIT~1", "NTFS short name"},
		{"a/progra~12", "NTFS short name"},
		{"a/b.GIT", ".git in upper case"},
		{"A.LOCK/b", ".lock directory in upper case"},
		{"a/" + strings.Repeat("b", 201), "segment over 200 bytes"},
		{"a/" + strings.Repeat("B", 130), "segment over 245 bytes on disk"},
		{"a/b@c", "@"},
		{"a/b!c", "!, the escape of the on-disk layout"},
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
		"GITEE.COM/A/B":           "gitee.com/a/b",
		"127.0.0.1:8080/x/Y":      "127.0.0.1:8080/x/Y",
		"Gitlab.com/U/Case":       "gitlab.com/U/Case",
		"[::1]:8080/a/b":          "[::1]:8080/a/b",
		"example.org/a/b.lock":    "example.org/a/b.lock",
		"example.org/~u/Console.": "",
		"example.org/a/CON":       "",
		"example.org/a/../b":      "",
		"example.org/a.git/b":     "",
		"example.org":             "",
	} {
		got, err := Folding{}.Canonical(in)
		if want == "" {
			if err == nil {
				t.Errorf("Canonical(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
		if err := Check(string(got)); err != nil {
			t.Errorf("Check(%q): %v", got, err)
		}
		if in != want && Check(in) == nil {
			t.Errorf("Check(%q) accepts a key that is not canonical", in)
		}
	}
}

func TestCaseIsFoldedOnlyWhereTheHostFoldsIt(t *testing.T) {
	f, err := NewFolding([]string{"git.corp.org", "code.example.com:8443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, key string }{
		{"https://git.corp.org/U/Repo.git", "git.corp.org/u/repo"},
		{"https://code.example.com:8443/U/Repo.git", "code.example.com:8443/u/repo"},
		{"https://code.example.com/U/Repo.git", "code.example.com/U/Repo"}, // another port, another host
		{"https://gitlab.com/U/Repo.git", "gitlab.com/U/Repo"},
		{"https://github.com/U/Repo.git", "github.com/u/repo"},
	} {
		key, _, err := Normalize(tc.url, Options{Fold: f})
		if err != nil || key.String() != tc.key {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.url, key, err, tc.key)
		}
		if c, err := f.Canonical(strings.ToUpper(tc.key[:1]) + tc.key[1:]); err != nil || string(c) != tc.key {
			t.Errorf("Canonical of %q's other spelling = %q, %v", tc.key, c, err)
		}
	}
	// Two repositories that differ only in case on a case-sensitive host
	// are two keys, and two directories, even where the file system folds
	// case.
	a, _, _ := Normalize("https://gitlab.com/u/Case.git", Options{})
	b, _, _ := Normalize("https://gitlab.com/u/case.git", Options{})
	if a == b || strings.EqualFold(Key(a).Dir(), Key(b).Dir()) {
		t.Fatalf("keys %q and %q, directories %q and %q", a, b, Key(a).Dir(), Key(b).Dir())
	}
	for _, bad := range []string{"Git.Corp", "host/x", "", "-h"} {
		if _, err := NewFolding([]string{bad}); err == nil {
			t.Errorf("NewFolding(%q) accepted", bad)
		}
	}
}

func TestDirIsReversibleAndKeepsOldDirectories(t *testing.T) {
	for key, dir := range map[string]string{
		"github.com/a/b":     "github.com/a/b", // an older layout's directory is unchanged
		"gitlab.com/U/Case":  "gitlab.com/!u/!case",
		"h.example/A-b.c/XY": "h.example/!a-b.c/!x!y",
	} {
		if got := Key(key).Dir(); got != dir {
			t.Errorf("Dir(%q) = %q, want %q", key, got, dir)
		}
		if back, err := KeyOfDir(dir); err != nil || string(back) != key {
			t.Errorf("KeyOfDir(%q) = %q, %v", dir, back, err)
		}
	}
	for _, dir := range []string{"h.example/A", "h.example/!", "h.example/!1", "h.example/!!a"} {
		if k, err := KeyOfDir(dir); err == nil {
			t.Errorf("KeyOfDir(%q) = %q, want an error", dir, k)
		}
	}
}

// FuzzCanonicalKey: the canonical form is idempotent, never holds what is
// refused, and two keys never share a directory, whatever the file
// system's case rules.
func FuzzCanonicalKey(f *testing.F) {
	for _, s := range []string{"github.com/a/b", "github.com/A/B", "gitlab.com/U/Case", "gitee.com/stra\u00dfe/\u03a3",
		"example.org/a/con.txt", "example.org/a\uff0fb", "example.org/a/b\u200b", "example.org/x.lock/y", "h/\u0130stanbul",
		"h/\u212a", "h/\u1e9e", "h/\ufb01x", "[::1]:80/a/b", "h.example/GIT~1", "h.example/a!b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := Folding{}.Canonical(in)
		if err != nil {
			return
		}
		key := string(k)
		again, err := Folding{}.Canonical(key)
		if err != nil || again != k {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, key, again, err)
		}
		if err := Check(key); err != nil {
			t.Fatalf("Check refuses the canonical %q: %v", key, err)
		}
		host, path, _ := strings.Cut(key, "/")
		segs := strings.Split(path, "/")
		for i, seg := range segs {
			for j := 0; j < len(seg); j++ {
				if !pathChar[seg[j]] {
					t.Fatalf("%q holds %q", key, seg[j])
				}
			}
			low := strings.ToLower(seg)
			base, _, _ := strings.Cut(low, ".")
			if strings.HasSuffix(seg, ".") || deviceName(base) || strings.HasSuffix(low, ".git") ||
				seg == "" || seg[0] == '.' || seg[0] == '-' || (i < len(segs)-1 && strings.HasSuffix(low, ".lock")) {
				t.Fatalf("%q has the refused segment %q", key, seg)
			}
		}
		if foldedByDefault[host] && strings.ToLower(key) != key {
			t.Fatalf("%q keeps upper case on a host that folds it", key)
		}
		// The directory is lower case (a case-insensitive file system
		// keeps it apart from every other key's) and gives the key back.
		dir := Key(key).Dir()
		if strings.ToLower(dir) != dir {
			t.Fatalf("Dir(%q) = %q has upper case", key, dir)
		}
		if back, err := KeyOfDir(dir); err != nil || string(back) != key {
			t.Fatalf("KeyOfDir(Dir(%q)) = %q, %v", key, back, err)
		}
		for _, seg := range strings.Split(dir, "/") {
			if len(seg)+len(".lock.git") > 255 {
				t.Fatalf("Dir(%q) has a segment of %d bytes", key, len(seg))
			}
		}
	})
}
