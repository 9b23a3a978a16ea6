package catalog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// sampleSeeds adds the real catalog files of the shared samples (when
// present) to a fuzz corpus, a few per folder.
func sampleSeeds(f *testing.F, add func(b []byte)) {
	const sample = "../../../shared/data/catalog-sample" // ../shared beside the checkout
	n := 0
	_ = filepath.WalkDir(sample, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || n > 40 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			add(b)
			n++
		}
		return nil
	})
}

var listSeeds = []string{
	"https://github.com/a/b\n",
	"# comment\n\nhttps://GitHub.com/A/b.git/ # trailing\r\nhttps://github.com/c/d",
	"\xef\xbb\xbfgit@gitlab.com:g/p.git\nftp://x/y\nhttps://u:p@h/a\nhttps://h/a/../b\n",
	"http://[::1]:8080/r.git\nhttps://h/a#b\n#\n \t \n",
}

var yamlSeeds = []string{
	"---\nurl:\n- https://github.com/gueFDF/Go.git",
	"url: https://github.com/a/b\nsubmit:\n- command: x\n  branches: [master]\n",
	"---\nurl: https://github.com/a/b\n---\nurl: https://github.com/c/d\n",
	"url: [https://github.com/a/b\n",
	"a: &a [x, x]\nb: [*a, *a]\nurl: *a\n",
	"url: {a: b}\nurl: []\n",
}

func FuzzParseList(f *testing.F) {
	for _, s := range listSeeds {
		f.Add([]byte(s))
	}
	sampleSeeds(f, func(b []byte) {
		for l := range bytes.Lines(b) {
			if bytes.HasPrefix(bytes.TrimSpace(l), []byte("- ")) {
				f.Add(bytes.TrimPrefix(bytes.TrimSpace(l), []byte("- ")))
			}
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := &fileData{name: &fileName{"f.list"}}
		parseList(fd, data, repokey.Options{AllowPrivate: true})
		lines := bytes.Count(data, []byte{'\n'}) + 1
		last := 0
		for i := range fd.entries {
			e := fd.entries[i].export(fd, int(fd.lines[i]))
			if e.Line <= last || e.Line > lines {
				t.Fatalf("entry %d on line %d (previous %d, %d lines)", i, e.Line, last, lines)
			}
			last = e.Line
			checkEntry(t, e)
		}
		for _, p := range fd.problems {
			if p.Line < 1 || p.Line > lines || p.Severity != SeverityError {
				t.Fatalf("problem %+v (%d lines)", p, lines)
			}
		}
	})
}

func FuzzParseYAML(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	sampleSeeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := &fileData{name: &fileName{"a/b/b"}, attrs: map[string]string{"owner": "x"}}
		parseYAML(fd, data, repokey.Options{AllowPrivate: true})
		if len(fd.entries) > 1 {
			t.Fatalf("%d entries from one YAML file", len(fd.entries))
		}
		for i := range fd.entries {
			e := fd.entries[i].export(fd, int(fd.lines[i]))
			checkEntry(t, e)
			if e.Attrs["owner"] == "" && !bytes.Contains(data, []byte("owner")) {
				t.Fatalf("lost the DEFAULTS attributes: %v", e.Attrs)
			}
			for k, v := range e.Attrs {
				if len(v) > maxAttrLen+maxAttrLen/2 && k != "owner" {
					t.Fatalf("attribute %q of %d bytes", k, len(v))
				}
			}
		}
		dd := &fileData{name: &fileName{"DEFAULTS"}}
		parseDefaults(dd, data)
		for _, p := range append(fd.problems, dd.problems...) {
			if p.Line < 1 || p.Reason == "" {
				t.Fatalf("problem %+v", p)
			}
		}
	})
}

// checkEntry checks what every parsed entry must satisfy: a valid key that
// its URL normalises to.
func checkEntry(t *testing.T, e Entry) {
	t.Helper()
	if err := repokey.Check(e.Key.String()); err != nil {
		t.Fatalf("entry key %q: %v", e.Key, err)
	}
	key, _, err := repokey.Normalize(e.URL, repokey.Options{AllowPrivate: true})
	if err != nil || key != e.Key {
		t.Fatalf("entry URL %q normalises to %q (%v), not its key %q", e.URL, key, err, e.Key)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"https://github.com/a/b", "https://GitHub.com/a/b.git/", "git@gitlab.com:g/p.git", "ssh://git@h:22/a",
		"http://127.0.0.1:8080/r", "https://[::1]/x", "ftp://h/a", "https://u:p@h/a", "https://h/a/../b",
		"https://h/a%2F..%2Fb", "https://h/a.git.git", "-https://h/a", "https://h/.git/x", "https://h:443/a/",
	} {
		f.Add(s, false)
	}
	sampleSeeds(f, func(b []byte) {
		for l := range bytes.Lines(b) {
			if u, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte("- ")); ok {
				f.Add(string(u), false)
			}
		}
	})
	f.Fuzz(func(t *testing.T, raw string, private bool) {
		opt := repokey.Options{AllowPrivate: private}
		key, fetch, err := repokey.Normalize(raw, opt)
		if err != nil {
			if !errors.Is(err, repokey.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := repokey.Check(key.String()); err != nil {
			t.Fatalf("Normalize(%q) gave key %q that Check refuses: %v", raw, key, err)
		}
		key2, fetch2, err := repokey.Normalize(fetch, opt)
		if err != nil || key2 != key || fetch2 != fetch {
			t.Fatalf("not idempotent: %q -> %q %q -> %q %q (%v)", raw, key, fetch, key2, fetch2, err)
		}
	})
}

func TestSimpleEntryAgreesWithTheYAMLParser(t *testing.T) {
	for _, s := range []string{
		"---\nurl:\n- https://github.com/gueFDF/Go.git",
		"---\nurl:\n- https://github.com/a/b.git\n- git@gitee.com:a/b.git\n\n\n",
		"url: https://github.com/a/b\r\n",
		"url: https:\n", "url:\n- https://x/a:\n", "url:\n- null\n", "url:\n- 'https://x/a'\n", "url:\n  - https://x/a\n",
		"---\nurl:\n\n- https://x/a\n", "url:\n- https://x/a\nowner: me\n", "url:\n- https://x/a # c\n", "url: https://x/%41\n",
		"\ufeff---\nurl:\n- https://x/a\n", "url:\n- https://x/a\n---\nurl: https://y/b\n", "---\n",
	} {
		checkSimpleEntry(t, []byte(s))
	}
	if _, ok := simpleEntry([]byte("---\nurl:\n- https://github.com/gueFDF/Go.git")); !ok {
		t.Error("the usual Compass-CI form should take the fast path")
	}
}

func checkSimpleEntry(t *testing.T, data []byte) {
	t.Helper()
	urls, ok := simpleEntry(data)
	if !ok {
		return // the YAML parser decides
	}
	f := &fileData{name: &fileName{"x"}}
	want, attrs, wantOK := yamlEntry(f, data)
	if !wantOK || len(attrs) > 0 || len(f.problems) > 0 || !slices.Equal(urls, want) {
		t.Fatalf("simpleEntry(%q) = %v, but the YAML parser reads %v %v %v (problems %v)", data, urls, want, attrs, wantOK, f.problems)
	}
}

func FuzzSimpleEntry(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	sampleSeeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(checkSimpleEntry)
}
