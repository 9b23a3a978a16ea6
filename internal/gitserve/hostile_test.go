package gitserve_test

import (
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"strings"
	"testing"
)

// v0Fetch is a protocol v0 fetch request: the first line carries the
// capabilities, as git's fetch-pack sends it.
func v0Fetch(first string, lines ...string) []byte {
	var b strings.Builder
	b.WriteString(pkt(first + " multi_ack_detailed side-band-64k ofs-delta agent=test\n"))
	for _, l := range lines {
		b.WriteString(pkt(l + "\n"))
	}
	return []byte(b.String() + "0000" + pkt("done\n"))
}

// v2FetchOf is v2Fetch for many lines.
func v2FetchOf(lines ...string) []byte {
	var b strings.Builder
	b.WriteString(pkt("command=fetch\n") + pkt("agent=test\n") + "0001")
	for _, l := range lines {
		b.WriteString(pkt(l + "\n"))
	}
	return []byte(b.String() + "0000")
}

func repeat(line string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = line
	}
	return out
}

// A hostile client sends each malformed request over protocol v0 and v2:
// each gets a 4xx, never a 500 (issue 33, item 6), none is logged as the
// repository's failure, and those that git itself refused are logged once
// for the client in the minute.
func TestEveryMalformedRequestGets4xxOverV0AndV2(t *testing.T) {
	var logs lockedBuffer
	f := newFixture(t, func(h *gitserve.Handler) { h.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
	if err := gittest.Git(f.repo, "tag", "dev", "refs/heads/dev"); err != nil { // dev: a branch and a tag
		t.Fatal(err)
	}
	tip := head(t, f)
	zeros64 := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name  string
		lines []string // after the first want of tip (or the want itself when first is set)
		first string   // the first want's id, tip when empty
	}{
		{"a want of 64 zeros", nil, zeros64},
		{"a want of 40 zeros", nil, strings.Repeat("0", 40)},
		{"a want of an unknown object", nil, strings.Repeat("ab", 20)},
		{"a second want of 64 zeros", []string{"want " + zeros64}, ""},
		{"100,000 deepen-not lines", repeat("deepen-not refs/heads/main", 100000), ""},
		{"a deepen-not of no ref", []string{"deepen-not refs/heads/nothing-here"}, ""},
		{"100,000 shallow lines", repeat("shallow "+tip, 100000), ""},
		{"a shallow of 64 zeros", []string{"shallow " + zeros64}, ""},
		{"a deepen-not that excludes every commit", []string{"deepen-not refs/heads/main"}, ""},
		{"a deepen-not that is no ref name", []string{"deepen-not refs/heads/*"}, ""},
		{"an ambiguous deepen-not", []string{"deepen-not dev"}, ""},
		{"a have of 64 zeros", []string{"have " + zeros64}, ""},
		{"a deepen that is no number", []string{"deepen abc"}, ""},
		{"a negative deepen", []string{"deepen -1"}, ""},
		{"a deepen past an int", []string{"deepen 99999999999999999999"}, ""},
		{"a deepen-since that is no time", []string{"deepen-since yesterday"}, ""},
		{"a deepen-since past an int", []string{"deepen-since 99999999999999999999"}, ""},
		{"deepen and deepen-since", []string{"deepen 1", "deepen-since 1"}, ""},
		{"a filter of a huge limit", []string{"filter blob:limit=99999999999999999999"}, ""},
		{"a want in upper case", []string{"want " + strings.ToUpper(tip)}, ""},
	} {
		first := tc.first
		if first == "" {
			first = tip
		}
		v2Lines := append([]string{"want " + first}, tc.lines...)
		for _, p := range []struct {
			name string
			body []byte
			hdr  map[string]string
		}{
			{"v0", v0Fetch("want "+first, tc.lines...), nil},
			{"v2", v2FetchOf(append(v2Lines, "done")...), v2},
		} {
			code, _, body := f.post(t, p.body, p.hdr)
			if code < 400 || code >= 500 {
				if len(body) > 200 {
					body = body[:200]
				}
				t.Errorf("%s over %s: got %d %q, want a 4xx", tc.name, p.name, code, body)
			}
		}
	}
	if n := strings.Count(logs.String(), "upload-pack failed"); n > 0 {
		t.Errorf("%d malformed requests logged as the repository's failure:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "git request refused by upload-pack"); n != 1 {
		t.Errorf("%d log lines about the client's requests that git refused, want 1 (one a client a minute):\n%s", n, logs.String())
	}
}

// The checks that refuse malformed requests leave well-formed ones alone.
func TestShallowFetchesStillWorkOverV0AndV2(t *testing.T) {
	f := newFixture(t, nil)
	tip, err := f.up.Commit("r", "main") // past v1
	if err != nil {
		t.Fatal(err)
	}
	for _, lines := range [][]string{
		{"deepen 1"},
		{"deepen 2147483647"},
		{"deepen-since 1"},
		{"deepen-not refs/tags/v1"},
		{"shallow " + strings.Repeat("ab", 20), "deepen 1"}, // a shallow of an unknown object is ignored, as git does
	} {
		for _, p := range []struct {
			name string
			body []byte
			hdr  map[string]string
		}{
			{"v0", v0Fetch("want "+tip, lines...), nil},
			{"v2", v2FetchOf(append(append([]string{"want " + tip}, lines...), "done")...), v2},
		} {
			if code, _, body := f.post(t, p.body, p.hdr); code != http.StatusOK || !strings.Contains(body, "PACK") {
				t.Errorf("%q over %s: got %d %.200q, want 200 and a pack", lines, p.name, code, body)
			}
		}
	}
	for _, dir := range []string{"a", "b"} {
		args := []string{"clone", "-q", "--depth=1", f.url, filepath.Join(t.TempDir(), dir)}
		if dir == "b" {
			args = append([]string{"-c", "protocol.version=0"}, args...)
		}
		if _, err := git(t, "", args...); err != nil {
			t.Errorf("git %s: %v", strings.Join(args, " "), err)
		}
	}
}
