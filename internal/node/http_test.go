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
	}{repos, 1}); err != nil {
		t.Fatal(err)
	}
	if page := out.String(); strings.Contains(page, "6379") || !strings.Contains(page, api.ErrClassUnreachable) {
		t.Errorf("the status page shows the error's details, or not its class:\n%s", page)
	}
}
