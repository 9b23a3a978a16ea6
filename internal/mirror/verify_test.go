package mirror

import (
	"reflect"
	"testing"
)

func TestVerifyAcceptsOnlyWhatTheUpstreamShows(t *testing.T) {
	t.Parallel()
	const a, b, c = "aaaa", "bbbb", "cccc"
	for _, tc := range []struct {
		name             string
		before, after    map[string]string
		upstream         map[string]string
		first            bool
		wantBad          []Mismatch
		wantScript       string
		wantQueryChanged bool
	}{
		{name: "a move the upstream shows", before: map[string]string{"refs/heads/main": a}, after: map[string]string{"refs/heads/main": b},
			upstream: map[string]string{"refs/heads/main": b}, wantScript: "update refs/heads/main bbbb aaaa\n", wantQueryChanged: true},
		{name: "a forged tip", before: map[string]string{"refs/heads/main": a}, after: map[string]string{"refs/heads/main": c},
			upstream: map[string]string{"refs/heads/main": b}, wantBad: []Mismatch{{Ref: "refs/heads/main", Tip: c, Upstream: b}}, wantQueryChanged: true},
		{name: "a rewind the upstream does not show", before: map[string]string{"refs/heads/main": b}, after: map[string]string{"refs/heads/main": a},
			upstream: map[string]string{"refs/heads/main": b}, wantBad: []Mismatch{{Ref: "refs/heads/main", Tip: a, Upstream: b}}, wantQueryChanged: true},
		{name: "a deletion the upstream shows", before: map[string]string{"refs/heads/main": a, "refs/tags/v1": b}, after: map[string]string{"refs/heads/main": a},
			upstream: map[string]string{}, wantScript: "delete refs/tags/v1 bbbb\n", wantQueryChanged: true},
		{name: "a vanishing ref the upstream still has", before: map[string]string{"refs/heads/main": a}, after: map[string]string{},
			upstream: map[string]string{"refs/heads/main": a}, wantBad: []Mismatch{{Ref: "refs/heads/main", Upstream: a}}, wantQueryChanged: true},
		{name: "a new tag", before: map[string]string{}, after: map[string]string{"refs/tags/v2": c},
			upstream: map[string]string{"refs/tags/v2": c}, wantScript: "create refs/tags/v2 cccc\n", wantQueryChanged: true},
		{name: "a first pull that leaves a ref out", after: map[string]string{"refs/heads/main": a}, first: true,
			upstream: map[string]string{"refs/heads/main": a, "refs/tags/v1": b}, wantBad: []Mismatch{{Ref: "refs/tags/v1", Upstream: b}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := changes(tc.before, tc.after)
			bad := verify(cs, tc.upstream, tc.first, tc.after)
			if !reflect.DeepEqual(bad, tc.wantBad) {
				t.Fatalf("mismatches %+v, want %+v", bad, tc.wantBad)
			}
			if q := upstreamQuery(cs, tc.first); (q != nil) != tc.wantQueryChanged {
				t.Fatalf("query %v", q)
			}
			if bad == nil {
				if s := updateRefScript(cs); s != tc.wantScript {
					t.Fatalf("script %q, want %q", s, tc.wantScript)
				}
			}
		})
	}
}

func TestUpstreamQueryListsEverythingAboveTheLimit(t *testing.T) {
	t.Parallel()
	cs := make([]RefChange, maxNamedRefs+1)
	if q := upstreamQuery(cs, false); q != nil {
		t.Fatalf("want one listing of every branch and tag, got %d names", len(q))
	}
	if q := upstreamQuery(cs[:maxNamedRefs], false); len(q) != maxNamedRefs {
		t.Fatalf("want the %d refs by name, got %d", maxNamedRefs, len(q))
	}
}
