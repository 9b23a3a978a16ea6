package mirror

import (
	"slices"
	"testing"
	"time"
)

func TestArchiveExpiredRule(t *testing.T) {
	t0 := time.Unix(1765100000, 0)
	day := 24 * time.Hour
	ref := func(name string, age time.Duration) ArchivedRef {
		return ArchivedRef{Name: name, At: t0.Add(-age)}
	}
	all := []ArchivedRef{ref("c", day), ref("a", 10*day), ref("b", 5*day), ref("d", 0)}
	for _, tc := range []struct {
		name      string
		retention time.Duration
		maxRefs   int
		want      []string
	}{
		{"forever and no cap", 0, 0, nil},
		{"forever under the cap", 0, 4, nil},
		{"the oldest past the cap", 0, 2, []string{"a", "b"}},
		{"past the retention", 5 * day, 0, []string{"a", "b"}},
		{"retention then cap", 7 * day, 1, []string{"a", "b", "c"}},
	} {
		var got []string
		for _, a := range archiveExpired(all, t0, tc.retention, tc.maxRefs) {
			got = append(got, a.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: expired %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestArchiveNamesNeverReuseOrGoBack(t *testing.T) {
	now := time.Unix(100, 0)
	existing := []ArchivedRef{{Name: archiveName(100, "refs/heads/main"), At: time.Unix(100, 0)},
		{Name: archiveName(105, "refs/heads/dev"), At: time.Unix(105, 0)}}
	got := archiveNames(existing, []RefChange{{Ref: "refs/heads/main", Old: "x"}}, now)
	if len(got) != 1 || got[0].Name != "refs/archive/105/refs/heads/main" || got[0].OID != "x" {
		t.Fatalf("names %v, want refs/archive/105/refs/heads/main", got)
	}
	got = archiveNames(existing, []RefChange{{Ref: "refs/heads/dev", Old: "y"}}, now)
	if len(got) != 1 || got[0].Name != "refs/archive/106/refs/heads/dev" {
		t.Fatalf("names %v, want refs/archive/106/refs/heads/dev", got)
	}
}
