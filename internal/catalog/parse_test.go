package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// got is what a parsed file contributed, in a form easy to compare.
type got struct {
	entries  []string // "key line url [fallbacks] attrs"
	problems []string // "line severity: reason"
}

func summarize(f *fileData) got {
	var g got
	for i := range f.entries {
		e := f.entries[i].export(f, int(f.lines[i]))
		s := fmt.Sprintf("%s %d %s", e.Key, e.Line, e.URL)
		if len(e.Fallbacks) > 0 {
			s += fmt.Sprintf(" %v", e.Fallbacks)
		}
		if len(e.Attrs) > 0 {
			s += " " + fmtAttrs(e.Attrs)
		}
		g.entries = append(g.entries, s)
	}
	for _, p := range f.problems {
		g.problems = append(g.problems, fmt.Sprintf("%d %s: %s", p.Line, p.Severity, p.Reason))
	}
	return g
}

func fmtAttrs(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// checkGot compares entries exactly and problems by prefix (line and
// severity) and by a fragment of the reason after "~".
func checkGot(t *testing.T, g got, entries, problems []string) {
	t.Helper()
	if !slices.Equal(g.entries, entries) {
		t.Errorf("entries:\n got  %q\n want %q", g.entries, entries)
	}
	if len(g.problems) != len(problems) {
		t.Fatalf("problems:\n got  %q\n want %q", g.problems, problems)
	}
	for i, want := range problems {
		head, frag, _ := strings.Cut(want, "~")
		if !strings.HasPrefix(g.problems[i], head) || !strings.Contains(g.problems[i], frag) {
			t.Errorf("problem %d: got %q, want %q...%q", i, g.problems[i], head, frag)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		path string
		want fileKind
	}{
		{"lists/a.list", kindList},
		{"a.list", kindList},
		{"g/go/go", kindYAML},
		{"aur-a/addresses.app/addresses.app", kindYAML},
		{"DEFAULTS", kindDefaults},
		{"a/b/DEFAULTS", kindDefaults},
		{"README", kindNone},
		{"README.md", kindNone},
		{"docs/Readme.txt", kindNone},
		{".gitignore", kindNone},
		{".github/workflows/ci.yml", kindNone},
		{"a/.hidden/x.list", kindNone},
		{"a/.x.list", kindNone},
	}
	for _, tt := range tests {
		if got := classify(tt.path); got != tt.want {
			t.Errorf("classify(%q) = %d, want %d", tt.path, got, tt.want)
		}
	}
}

func TestParseListReadsOneURLPerLine(t *testing.T) {
	long := "https://github.com/" + strings.Repeat("abcdefgh/", 60) + "x"
	tests := []struct {
		name     string
		in       string
		entries  []string
		problems []string
	}{
		{"comments and blank lines are skipped",
			"# upstreams\n\nhttps://github.com/a/b # the main one\n  \t\n\t https://github.com/c/d \n#https://github.com/e/f\n",
			[]string{"github.com/a/b 3 https://github.com/a/b", "github.com/c/d 5 https://github.com/c/d"}, nil},
		{"CRLF line ends",
			"https://github.com/a/b\r\n\r\nhttps://github.com/c/d.git\r\n",
			[]string{"github.com/a/b 1 https://github.com/a/b", "github.com/c/d 3 https://github.com/c/d.git"}, nil},
		{"no final newline",
			"https://github.com/a/b\nhttps://github.com/c/d",
			[]string{"github.com/a/b 1 https://github.com/a/b", "github.com/c/d 2 https://github.com/c/d"}, nil},
		{"a byte order mark",
			"\xef\xbb\xbfhttps://github.com/a/b\n",
			[]string{"github.com/a/b 1 https://github.com/a/b"}, nil},
		{"URLs are normalised to keys, and cleaned",
			"https://GitHub.com/A/b.git/\ngit://git.example.org/x/y.git\ngit@gitlab.com:g/p.git\nhttp://h.example.org:80/r\n",
			[]string{
				"github.com/a/b 1 https://github.com/A/b.git/",
				"git.example.org/x/y 2 git://git.example.org/x/y.git",
				"gitlab.com/g/p 3 ssh://git@gitlab.com/g/p.git",
				"h.example.org/r 4 http://h.example.org:80/r",
			}, nil},
		{"every kind of bad entry is reported with its line and skipped",
			"github.com/a/b\nftp://github.com/a/b\nhttps://user:secret@github.com/a/b\nhttps://github.com/a/../../etc\n" +
				long + "\nhttps://github.com/a/b#frag\nhttps://github.com/ok/one\n",
			[]string{"github.com/ok/one 7 https://github.com/ok/one"},
			[]string{"1 error: ~not a URL", "2 error: ~scheme \"ftp\" is not allowed", "3 error: ~credentials",
				"4 error: ~'..' segment", "5 error: ~key longer than 512", "6 error: ~fragments"}},
		{"the same key twice in a file: both are parsed (the catalog keeps one)",
			"https://github.com/a/b\nhttps://github.com/a/b.git\n",
			[]string{"github.com/a/b 1 https://github.com/a/b", "github.com/a/b 2 https://github.com/a/b.git"}, nil},
		{"a private address is refused",
			"http://127.0.0.1:8080/r\n", nil, []string{"1 error: ~blocked destination: 127.0.0.1: loopback"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fileData{name: &fileName{"x.list"}}
			parseList(f, []byte(tt.in), repokey.Options{})
			checkGot(t, summarize(f), tt.entries, tt.problems)
		})
	}
}

func TestParseListKeysShareOneStringAndEntriesStayCompact(t *testing.T) {
	f := &fileData{name: &fileName{"x.list"}}
	parseList(f, []byte("https://github.com/a/b\nhttps://github.com/c/d.git\n"), repokey.Options{})
	if f.entries[0].extra != nil || f.entries[1].extra != nil {
		t.Errorf("https URLs should be rebuilt from their key, got extras %+v %+v", f.entries[0].extra, f.entries[1].extra)
	}
	k0, k1 := f.entries[0].key.String(), f.entries[1].key.String()
	if got := strings.Join([]string{k0, k1}, ""); got != "github.com/a/bgithub.com/c/d" {
		t.Fatalf("keys %q %q", k0, k1)
	}
	if unsafe.StringData(k1) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(k0)), len(k0))) {
		t.Error("the keys of one file should share one string")
	}
}

func TestParseListAllowsPrivateUpstreamsWhenAsked(t *testing.T) {
	f := &fileData{name: &fileName{"x.list"}}
	parseList(f, []byte("http://127.0.0.1:8080/r.git\n"), repokey.Options{AllowPrivate: true})
	checkGot(t, summarize(f), []string{"127.0.0.1:8080/r 1 http://127.0.0.1:8080/r.git"}, nil)
}

func TestParseYAMLReadsOneEntryPerFile(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		entries  []string
		problems []string
	}{
		{"url as a string", "url: https://github.com/a/b\n",
			[]string{"github.com/a/b 1 https://github.com/a/b"}, nil},
		{"url as a list: the first is the upstream, the rest fallbacks",
			"---\nurl:\n- https://github.com/a/b.git\n- https://gitee.com/mirror/b\n",
			[]string{"github.com/a/b 3 https://github.com/a/b.git [https://gitee.com/mirror/b]"}, nil},
		{"other keys are attributes; lists and maps as compact JSON",
			"url: https://github.com/a/b\nowner: me\nprio: 3\nenabled: true\nnothing:\n" +
				"submit:\n- command: make <all>\n  branches: [master, \"v1\"]\n  n: 0x10\n",
			[]string{`github.com/a/b 1 https://github.com/a/b {enabled=true nothing= owner=me prio=3 submit=[{"command":"make <all>","branches":["master","v1"],"n":16}]}`},
			nil},
		{"comments, CRLF and no final newline",
			"# the upstream\r\nurl:\r\n  - https://github.com/a/b # main\r\n",
			[]string{"github.com/a/b 3 https://github.com/a/b"}, nil},
		{"empty documents before the entry are skipped",
			"---\n---\nurl: https://github.com/a/b\n",
			[]string{"github.com/a/b 3 https://github.com/a/b"}, nil},
		{"a second document is reported and ignored",
			"---\nurl: https://github.com/a/b\n---\nurl: https://github.com/c/d\n",
			[]string{"github.com/a/b 2 https://github.com/a/b"},
			[]string{"4 error: ~second YAML document"}},
		{"malformed YAML is reported and the file skipped",
			"url:\n- https://github.com/a/b\n- [unclosed\nowner: x\n",
			nil, []string{"~error: not valid YAML"}}, // yaml.v3 puts this one on line 2
		{"a file that never mentions url is not an entry file",
			"MIT License\n\nPermission is hereby granted: free of charge\n", nil, nil},
		{"a document that is not a mapping is not an entry file",
			"- see the url list elsewhere\n", nil, nil},
		{"a mapping without url is reported as a warning",
			"homepage_url: https://example.org\n", nil, []string{"1 warning: ~without a url"}},
		{"url of the wrong type", "url: {a: b}\n", nil, []string{"1 error: ~want a URL or a list"}},
		{"url empty", "url:\n", nil, []string{"1 error: ~want a URL"}},
		{"url an empty list", "url: []\n", nil, []string{"1 error: ~empty list"}},
		{"a bad upstream skips the entry", "url:\n- ftp://github.com/a/b\n- https://github.com/a/b\n",
			nil, []string{"2 error: ~scheme"}},
		{"a bad fallback is dropped, the entry kept",
			"url:\n- https://github.com/a/b\n- https://u:p@gitee.com/a/b\n",
			[]string{"github.com/a/b 2 https://github.com/a/b"}, []string{"3 error: fallback URL skipped: ~credentials"}},
		{"a repeated key: the first is used",
			"url: https://github.com/a/b\nurl: https://github.com/c/d\n",
			[]string{"github.com/a/b 1 https://github.com/a/b"}, []string{"2 error: ~repeated"}},
		{"an alias bomb in an attribute is refused",
			"url: https://github.com/a/b\na: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n" +
				"c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d]\n",
			nil, nil}, // checked below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fileData{name: &fileName{"a/b/b"}}
			parseYAML(f, []byte(tt.in), repokey.Options{})
			g := summarize(f)
			if strings.HasPrefix(tt.name, "an alias bomb") {
				if len(f.entries) != 1 || len(f.problems) != 1 || !strings.Contains(f.problems[0].Reason, `attribute "e" skipped`) {
					t.Fatalf("got %+v", g)
				}
				if len(f.entries[0].export(f, 1).Attrs["d"]) > maxAttrLen+1000 {
					t.Fatal("attribute d should stay under the bound")
				}
				return
			}
			checkGot(t, g, tt.entries, tt.problems)
		})
	}
}

func TestParseDefaults(t *testing.T) {
	f := &fileData{name: &fileName{"a/DEFAULTS"}}
	attrs := parseDefaults(f, []byte("---\nsubmit:\n- command: x\nurl: https://github.com/not/inherited\nowner: team\n"))
	want := map[string]string{"submit": `[{"command":"x"}]`, "owner": "team"}
	if !maps.Equal(attrs, want) {
		t.Errorf("attrs = %v, want %v", attrs, want)
	}
	checkGot(t, summarize(f), nil, []string{"4 warning: ~url: in DEFAULTS is ignored"})

	f = &fileData{name: &fileName{"DEFAULTS"}}
	if attrs := parseDefaults(f, []byte("- a\n- b\n")); attrs != nil {
		t.Errorf("a list is not DEFAULTS, got %v", attrs)
	}
	checkGot(t, summarize(f), nil, []string{"1 error: ~must be a YAML mapping"})
}

func TestDefaultsMergeInnerOverOuter(t *testing.T) {
	own := map[string]map[string]string{
		"":      {"a": "root", "b": "root"},
		"x":     {"b": "x", "c": "x"},
		"x/y/z": {"c": "xyz"},
		"q":     nil, // a DEFAULTS with nothing usable
	}
	merged := defaultsAbove(own)
	tests := []struct {
		dir  string
		want map[string]string
	}{
		{"", map[string]string{"a": "root", "b": "root"}},
		{"other/dir", map[string]string{"a": "root", "b": "root"}},
		{"x", map[string]string{"a": "root", "b": "x", "c": "x"}},
		{"x/y", map[string]string{"a": "root", "b": "x", "c": "x"}},
		{"x/y/z/w", map[string]string{"a": "root", "b": "x", "c": "xyz"}},
		{"q/r", map[string]string{"a": "root", "b": "root"}},
	}
	for _, tt := range tests {
		if got := attrsFor(merged, tt.dir); !maps.Equal(got, tt.want) {
			t.Errorf("attrsFor(%q) = %v, want %v", tt.dir, got, tt.want)
		}
	}
	if own["x"]["a"] != "" {
		t.Error("merging must not modify a directory's own attributes")
	}
}

func TestOutermostDropsNestedDirectories(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"a/b", "a", "c/d", "c/de"}, []string{"a", "c/d", "c/de"}},
		{[]string{"x", ""}, []string{""}},
		{[]string{"a", "a"}, []string{"a"}},
	}
	for _, tt := range tests {
		if got := outermost(slices.Clone(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("outermost(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A URL the egress policy refuses is a problem marked Refused, in a list
// and in YAML, as a first URL and as a fallback; a malformed URL is not:
// purge protection holds the first kind at a restart and not the second.
func TestProblemsTheEgressPolicyCausesAreMarkedRefused(t *testing.T) {
	f := &fileData{name: &fileName{"x.list"}}
	parseList(f, []byte("http://127.0.0.1:8080/r.git\nhttps://github.com/a/b?x=1\nhttps://github.com/a/b\n"), repokey.Options{})
	if len(f.problems) != 2 {
		t.Fatalf("problems %+v, want 2", f.problems)
	}
	if !f.problems[0].Refused || f.problems[1].Refused {
		t.Errorf("refused = %v, %v; want the private address refused and the query string not (%+v)",
			f.problems[0].Refused, f.problems[1].Refused, f.problems)
	}

	y := &fileData{name: &fileName{"b.yaml"}}
	parseYAML(y, []byte("url:\n- https://github.com/a/b\n- http://10.0.0.1/b.git\n"), repokey.Options{})
	if len(y.problems) != 1 || !y.problems[0].Refused || y.problems[0].Key != "github.com/a/b" {
		t.Errorf("YAML fallback problems %+v, want one, refused, under github.com/a/b", y.problems)
	}
}
