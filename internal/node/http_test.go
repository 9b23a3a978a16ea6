package node

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/api"
)

func TestTheStatusPageShowsErrorClassesOnly(t *testing.T) {
	var out strings.Builder
	repos := []api.Repo{{Key: "github.com/a/b", State: "failing",
		LastError: "git fetch http://10.0.0.5:6379/a/b.git: network: Failed to connect to 10.0.0.5 port 6379: Connection refused"}}
	if err := statusTmpl.Execute(&out, struct {
		Repos []api.Repo
		Total int
		Held  *api.PendingPurge
	}{repos, 1, nil}); err != nil {
		t.Fatal(err)
	}
	if page := out.String(); strings.Contains(page, "6379") || !strings.Contains(page, api.ErrClassUnreachable) {
		t.Errorf("the status page shows the error's details, or not its class:\n%s", page)
	}
}

func TestTheStatusPageNamesAHeldCatalogChange(t *testing.T) {
	for _, held := range []*api.PendingPurge{nil, {Commit: "c0ffee", Removed: 7, Total: 100, Keys: []string{"github.com/a/<b>", "github.com/a/c"}}} {
		var out strings.Builder
		if err := statusTmpl.Execute(&out, struct {
			Repos []api.Repo
			Total int
			Held  *api.PendingPurge
		}{nil, 0, held}); err != nil {
			t.Fatal(err)
		}
		page := out.String()
		if held == nil {
			if strings.Contains(page, "Held back") {
				t.Errorf("nothing held, yet:\n%s", page)
			}
			continue
		}
		if want := "the removal of 7 of 100 repositories is held (catalog commit c0ffee): github.com/a/&lt;b&gt;, github.com/a/c and 5 more"; !strings.Contains(page, want) {
			t.Errorf("the page does not name what is held (%q):\n%s", want, page)
		}
	}
}
