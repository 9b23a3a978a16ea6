package e2e

import (
	"testing"
	"time"
)

// With a background budget of 2 checks an hour, a pushed repository would
// wait for hours in the background lane; an on-demand check goes to the
// urgent lane and is done at once.
func TestUrgentCheckOvertakesALongBackgroundQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 20)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.writeCatalog(repos, "20 repositories")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	slow := []string{"--budget", "2", "--max-interval", "24h", "--min-interval", "1h"}
	f.startNode("full", "full", append([]string{"--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken}, slow...)...)
	f.startNode("partial-1", "partial", slow...)
	// Initial clones are not held by the budget, but a retry is: a first
	// clone that failed for a passing reason (a busy machine) would wait in
	// the background lane for the rest of the test. Only repository 7
	// matters here; if its clone failed, it is fetched on demand before
	// the push, which is what an operator would do.
	eventually(t, 60*time.Second, "repository 7 cloned", func() error {
		err := f.servedLikeUpstream([]int{7})
		if err != nil && f.failed(7) {
			t.Logf("first clone of %s failed; fetching it on demand", f.key(7))
			call(t, "POST", f.base+"/api/v1/repos/"+f.key(7)+"/fetch?wait=30s", apiToken, nil, nil)
		}
		return err
	})

	newID, err := f.up.Commit(f.name(7), "main")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if got, _ := lsRemote(f.base + "/" + f.key(7) + ".git"); got["refs/heads/main"] == newID {
		t.Fatal("the background lane checked the repository within seconds: the budget is not limiting, the test proves nothing")
	}
	var tk task
	start := time.Now()
	if code := call(t, "POST", f.base+"/api/v1/repos/"+f.key(7)+"/fetch?wait=30s", apiToken, nil, &tk); code != 200 || tk.State != "done" {
		t.Fatalf("fetch: %d %+v", code, tk)
	}
	if tk.NewRefs["refs/heads/main"] != newID {
		t.Fatalf("the urgent check did not bring the push: %+v", tk)
	}
	t.Logf("urgent check done in %s while the background lane allows 2 checks an hour", time.Since(start).Round(time.Millisecond))
}

// failed reports whether the API shows repository i's last check as failed.
func (f *fleet) failed(i int) bool {
	repos, err := apiRepos(f.base)
	if err != nil {
		return false
	}
	r, ok := repos[f.key(i)]
	return ok && r.Error != ""
}
