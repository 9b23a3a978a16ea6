package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// An upstream whose branches and tags all vanish (a botched migration, or
// a forge that answers with nothing) is not believed at once: the mirror
// keeps serving the refs it had until a later check confirms the emptying.
// Meanwhile the repository is not current, and its last_error says why
// (issue 33, item 3): at every check until the confirmation, not only the
// first.
func TestAnUpstreamEmptiedUnderConfirmationIsNotCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 3)
	f.seed(repos, "3 repositories")
	f.startUp()
	eventually(t, 60*time.Second, "all served", func() error { return f.servedLikeUpstream(repos) })
	victim, name := f.key(1), f.name(1)
	eventually(t, 60*time.Second, "the repository current", func() error {
		all, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		if r := all[victim]; !r.Current {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})

	had, err := f.up.Refs(name)
	if err != nil {
		t.Fatal(err)
	}
	for ref := range had {
		if err := gittest.Git(filepath.Join(f.up.Dir, name+".git"), "update-ref", "-d", ref); err != nil {
			t.Fatal(err)
		}
	}
	notCurrent := func() error {
		all, err := apiReposAs(f.base, apiToken)
		if err != nil {
			return err
		}
		r := all[victim]
		if !strings.Contains(r.Error, "advertises no branches or tags") {
			return fmt.Errorf("the empty advertisement not reported yet: %+v", r)
		}
		if r.Current {
			t.Fatalf("current while the empty advertisement waits for its confirmation: %+v", r)
		}
		return nil
	}
	eventually(t, 60*time.Second, "the empty advertisement reported, not current", notCurrent)
	// Two more checks of the upstream (each lists its refs): still under
	// confirmation, still not current, and the old refs still served.
	seen := f.up.Listings(name)
	eventually(t, 60*time.Second, "two more checks", func() error {
		if n := f.up.Listings(name); n < seen+2 {
			return fmt.Errorf("%d listings since", n-seen)
		}
		return nil
	})
	if err := notCurrent(); err != nil {
		t.Fatal(err)
	}
	got, err := lsRemote(f.base + "/" + victim + ".git")
	if err != nil || !maps.Equal(got, had) {
		t.Fatalf("served %v (%v), want the refs before the emptying %v", got, err, had)
	}
}
