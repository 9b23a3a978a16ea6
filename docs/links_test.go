// Package docs holds gitfleet's documentation (Markdown, read on GitHub
// or in a checkout) and the tests that keep it whole: every relative link
// of README.md, docs/*.md and the examples' READMEs leads to a file that
// exists, every #anchor to a heading of its file, and the README stays a
// front page.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files whose links are checked, relative to this
// directory: the README, docs/ and the examples' READMEs.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join("..", "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]string{filepath.Join("..", "README.md")}, docs...), examples...)
}

// slug is the anchor GitHub gives a heading: the text as rendered (links
// reduced to their text), lower case, with every character but letters,
// digits, spaces, '-' and '_' dropped and spaces turned into '-'.
func slug(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var (
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdLink   = regexp.MustCompile(`!?\[([^\]]*)\]\(([^()\s]*)(?:\s+"[^"]*")?\)`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
)

// page is what the checks need of one Markdown file.
type page struct {
	anchors map[string]bool
	links   []link
}

type link struct {
	line   int
	target string
}

// parse reads a Markdown file: the anchors of its headings (a repeated
// heading's anchor gets -1, -2, ... as on GitHub) and its links, leaving
// out fenced code blocks and code spans, where brackets are not links.
func parse(path string) (page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return page{}, err
	}
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllStringFunc(line, func(code string) string {
			// A heading's anchor keeps a code span's text; a link inside
			// one is not a link.
			return strings.NewReplacer("[", "", "]", "", "(", "", ")", "").Replace(strings.Trim(code, "`"))
		})
		if m := heading.FindStringSubmatch(line); m != nil {
			a := slug(m[1])
			if n := seen[a]; n > 0 {
				a = fmt.Sprintf("%s-%d", a, n)
			}
			seen[slug(m[1])]++
			p.anchors[a] = true
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			p.links = append(p.links, link{line: i + 1, target: m[2]})
		}
	}
	return p, nil
}

func TestSlugFollowsGitHubsRules(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"The API, webhooks and gitfleet ctl", "the-api-webhooks-and-gitfleet-ctl"},
		{"Freshness: what the full node vouches for", "freshness-what-the-full-node-vouches-for"},
		{"Two or three coordinators (high availability)", "two-or-three-coordinators-high-availability"},
		{"Forge feeds (internal/forge, [forges.md](forges.md))", "forge-feeds-internalforge-forgesmd"},
		{"Placement (internal/ring, internal/placement)", "placement-internalring-internalplacement"},
		{"A first real mirror in ten minutes", "a-first-real-mirror-in-ten-minutes"},
		{"The flags you need", "the-flags-you-need"},
		{"log_level and --max-repo-size", "log_level-and---max-repo-size"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestARepeatedHeadingGetsANumberedAnchor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(path, []byte("# Limits\n\n## Limits\n\n```\n# Limits\n```\n\n### `Limits`\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := parse(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"limits", "limits-1", "limits-2"} {
		if !p.anchors[a] {
			t.Errorf("no anchor %q in %v", a, p.anchors)
		}
	}
	if p.anchors["limits-3"] {
		t.Error("a heading in a fenced code block made an anchor")
	}
}

// Every relative link of the README and of docs/*.md leads to a file or
// directory of the repository, and every #anchor to a heading of its page.
func TestEveryRelativeLinkAndAnchorResolves(t *testing.T) {
	parsed := map[string]page{}
	get := func(path string) (page, error) {
		path = filepath.Clean(path)
		if p, ok := parsed[path]; ok {
			return p, nil
		}
		p, err := parse(path)
		if err == nil {
			parsed[path] = p
		}
		return p, err
	}
	var files, anchors int
	for _, from := range pages(t) {
		p, err := get(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := from
			if path != "" {
				dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %v", from, l.line, target, err)
					continue
				}
				files++
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", from, l.line, target)
				continue
			}
			to, err := get(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", from, l.line, target, err)
				continue
			}
			if !to.anchors[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor %q", from, l.line, target, dest, anchor)
			}
			anchors++
		}
	}
	// The README links every page of docs/ and some of their sections: a
	// parser that found no links would pass the checks above vacuously.
	t.Logf("%d links to files and %d anchors resolve", files, anchors)
	if files < 20 || anchors < 10 {
		t.Fatalf("checked %d links to files and %d anchors: the parser missed the links", files, anchors)
	}
}

// The README is a front page: what gitfleet is, how to start, and links.
// The reference lives in docs/.
func TestTheReadmeIsAFrontPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) >= 250 {
		t.Errorf("README.md has %d lines; keep it under 250 and move the reference into docs/", len(lines))
	}
	for i, line := range lines {
		if n := len([]rune(line)); n > 300 {
			t.Errorf("README.md:%d has %d characters; keep lines under 300", i+1, n)
		}
	}
}
