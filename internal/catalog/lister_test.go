package catalog

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

func listerSummary(f *fileData) []string {
	var out []string
	for _, l := range f.listers {
		s := fmt.Sprintf("%d %s base=%s owner=%s", l.Line, l.Pattern, l.Base, l.Owner)
		if l.Subgroups {
			s += " subgroups"
		}
		if l.Filter.NoForks {
			s += " no-forks"
		}
		if l.Filter.NoArchived {
			s += " no-archived"
		}
		if l.Filter.MaxSize > 0 {
			s += fmt.Sprintf(" max=%d", l.Filter.MaxSize)
		}
		if len(l.Filter.Topics) > 0 {
			s += fmt.Sprintf(" topics=%v", l.Filter.Topics)
		}
		out = append(out, s+" "+fmtAttrs(l.Attrs))
	}
	return out
}

func TestAListerLineIsAListerNotAKey(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		listers  []string
		problems []string
	}{
		{"an organisation, a GitLab group with its subgroups, a Gitea host",
			"https://github.com/Org/*\nhttps://gitlab.com/group/sub/**\nhttps://git.example.org/team/*\nhttps://github.com/a/b\n",
			[]string{
				"1 https://github.com/Org/* base=https://github.com owner=Org {lister=https://github.com/Org/*}",
				"2 https://gitlab.com/group/sub/** base=https://gitlab.com owner=group/sub subgroups {lister=https://gitlab.com/group/sub/**}",
				"3 https://git.example.org/team/* base=https://git.example.org owner=team {lister=https://git.example.org/team/*}",
			}, nil},
		{"filters after the URL, as a flow mapping's content",
			"https://github.com/org/* forks: false, archived: false, max-size: 500MB, topics: [go, rust], archive: true\n",
			[]string{"1 https://github.com/org/* base=https://github.com owner=org no-forks no-archived max=500000000 topics=[go rust] {archive=true lister=https://github.com/org/*}"},
			nil},
		{"hostile lines are refused with a reason",
			"https://github.com/*/x\nhttps://github.com/org/***\nhttps://github.com/org/x*\nhttps://github.com/*\nhttps://user:pw@github.com/org/*\n" +
				"https://github.com/org/* forks: maybe\nhttps://github.com/org/* max-size: lots\nhttps://github.com/org/* {{\nhttps://github.com/org/../../*\n",
			nil,
			[]string{"1 error: ~may only end the path", "2 error: ~may only end the path", "3 error: ~may only end the path",
				"4 error: ~no owner", "5 error: ~credentials", "6 error: ~forks: \"maybe\"", "7 error: ~bad size",
				"8 error: ~attributes after the lister", "9 error: ~'..' segment"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fileData{name: &fileName{"x.list"}}
			parseList(f, []byte(tt.in), repokey.Options{})
			if got := listerSummary(f); !slices.Equal(got, tt.listers) {
				t.Errorf("listers:\n got  %q\n want %q", got, tt.listers)
			}
			var entries []string
			if strings.Contains(tt.in, "github.com/a/b") {
				entries = []string{"github.com/a/b 4 https://github.com/a/b"}
			}
			checkGot(t, summarize(f), entries, tt.problems)
		})
	}
}

func TestAYAMLEntryCanBeALister(t *testing.T) {
	r := newTestRepo(t)
	c := r.load(r.commit(map[string]string{
		"orgs/DEFAULTS": "archive: true\n",
		"orgs/acme":     "url: https://github.com/acme/*\nforks: false\ntopics: [tools]\n",
	}))
	ls := c.Listers()
	if len(ls) != 1 || ls[0].Pattern != "https://github.com/acme/*" || !ls[0].Filter.NoForks ||
		!slices.Equal(ls[0].Filter.Topics, []string{"tools"}) || ls[0].Attrs["archive"] != "true" || ls[0].File != "orgs/acme" || ls[0].Line != 1 {
		t.Fatalf("listers %+v", ls)
	}
	if c.Len() != 0 || len(c.Problems()) != 0 {
		t.Fatalf("a lister made %d entries and problems %v", c.Len(), c.Problems())
	}
}

func TestListingsBecomeEntriesAndTheirChangesADelta(t *testing.T) {
	r := newTestRepo(t)
	c := r.load(r.commit(map[string]string{
		"a.list":   "https://github.com/acme/tool\nhttps://github.com/acme/* forks: false, max-size: 1KB, lister-note: x\n",
		"b.list":   "https://gitlab.com/grp/**\n",
		"README":   "not an entry",
		"c/x.yaml": "url: https://github.com/other/*\n",
	}))
	pattern := "https://github.com/acme/*"
	lists := map[string][]Listed{
		pattern: {
			{Name: "acme/tool"}, {Name: "acme/Lib"}, {Name: "acme/fork", Fork: true}, {Name: "acme/big", Size: 2000},
			{Name: "acme/Lib"},                                   // twice: once
			{Name: "other/x"}, {Name: "acme/a/b"}, {Name: "x/*"}, // not below acme: refused
		},
		"https://gitlab.com/grp/**": {{Name: "grp/sub/p"}, {Name: "grp/q"}},
	}
	next, d := c.WithListings(lists)
	if got, want := keysOf(d.Added), []string{"github.com/acme/lib", "gitlab.com/grp/q", "gitlab.com/grp/sub/p"}; !slices.Equal(got, want) {
		t.Fatalf("added %v, want %v", got, want)
	}
	e, ok := next.Get("github.com/acme/lib")
	if !ok || e.URL != "https://github.com/acme/Lib" || e.Attrs[AttrLister] != pattern || e.Attrs["lister-note"] != "x" ||
		e.Attrs[AttrForks] != "" || e.File != "a.list" || e.Line != 2 {
		t.Fatalf("listed entry %+v", e)
	}
	// The catalog's own line wins over the listing's.
	if e, _ := next.Get("github.com/acme/tool"); e.Attrs[AttrLister] != "" || e.Line != 1 {
		t.Fatalf("github.com/acme/tool is %+v, want the catalog's line", e)
	}
	probs := next.Problems()
	if len(probs) != 1 || probs[0].File != "a.list" || probs[0].Line != 2 || !strings.Contains(probs[0].Reason, "3 repositories that are not below acme") {
		t.Fatalf("problems %v", probs)
	}
	if c.Len() != 1 || next.Len() != 4 {
		t.Fatalf("lengths %d and %d: the first catalog changed, or the second is wrong", c.Len(), next.Len())
	}
	// The same listing again changes nothing; one that drops a
	// repository removes it.
	if again, d := next.WithListings(lists); again != next || len(d.Added)+len(d.Removed)+len(d.Changed) != 0 {
		t.Fatalf("the same listings changed %+v", d)
	}
	lists[pattern] = lists[pattern][:1]
	_, d = next.WithListings(lists)
	if got := keysOf(d.Removed); !slices.Equal(got, []string{"github.com/acme/lib"}) || len(d.Added)+len(d.Changed) != 0 {
		t.Fatalf("a listing that dropped one: %+v", d)
	}
	// A lister line gone from the catalog takes its entries with it.
	updated, d, err := next.Update(t.Context(), testGit, r.gitDir(), r.commit(map[string]string{"b.list": deleted}))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ListersRemoved) != 1 || d.ListersRemoved[0].Pattern != "https://gitlab.com/grp/**" || len(d.Removed) != 0 {
		t.Fatalf("the update's delta %+v", d)
	}
	_, d = updated.WithListings(lists)
	if got := keysOf(d.Removed); !slices.Equal(got, []string{"github.com/acme/lib", "gitlab.com/grp/q", "gitlab.com/grp/sub/p"}) {
		t.Fatalf("removed %v", got)
	}
}

func TestDeltaThenComposesTwoChanges(t *testing.T) {
	e := func(k string) Entry { return Entry{Key: repokey.Key(k)} }
	d := Delta{Added: []Entry{e("a"), e("b")}, Removed: []Entry{e("c"), e("d")}, Changed: []Entry{e("f")}}
	then := Delta{Added: []Entry{e("c"), e("g")}, Removed: []Entry{e("a"), e("f")}, Changed: []Entry{e("b")}}
	got := d.Then(then)
	if !slices.Equal(keysOf(got.Added), []string{"b", "g"}) || !slices.Equal(keysOf(got.Removed), []string{"d", "f"}) ||
		!slices.Equal(keysOf(got.Changed), []string{"c"}) {
		t.Fatalf("got %+v", got)
	}
}

func TestAddListingsMakesTheCatalogWithListingsMakes(t *testing.T) {
	r := newTestRepo(t)
	c := r.load(r.commit(map[string]string{
		"a.list": "https://github.com/acme/tool\nhttps://github.com/acme/* forks: false\n",
		"b.list": "https://gitlab.com/grp/**\n",
	}))
	lists := map[string][]Listed{
		"https://github.com/acme/*": {{Name: "acme/tool"}, {Name: "acme/lib"}, {Name: "acme/fork", Fork: true}, {Name: "other/x"}},
		"https://gitlab.com/grp/**": {{Name: "grp/sub/p"}},
	}
	want, _ := c.WithListings(lists)
	if got := c.AddListings(lists); !slices.Equal(dump(got), dump(want)) {
		t.Fatalf("AddListings:\n%q\nWithListings:\n%q", dump(got), dump(want))
	}
}
