package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/node"
)

// capBytes is the volunteer's cap in the test: 2 MiB/s.
const capBytes = 2 << 20

// TestAVolunteersMachineIsKeptToTheirCapAndHours: a partial node capped at
// 2MiB/s, outside its active hours, is the only node that can hold a
// repository of 20 MiB. The coordinator gives it the first clone all the
// same (no other node can); the node clones it at once (a first clone is
// urgent) and does no background check. Its clone from the upstream, and
// the full node's pull of it through the tunnel, each take at least the
// time the cap implies for the bytes the node counted, and less than ten
// times it, while an uncapped clone of the same repository in the same run
// takes less than half the capped one (that the cap keeps to its rate, not
// 20% more, is asserted on its own schedule by the tunnel's and egress's
// tests, which a busy machine cannot stretch); the full node's log shows how long the partial node's check took (ctl
// log, ctl show). gitfleet node status says what the node holds, its
// share, the bytes it moved today, its hours and cap, and once it is
// revoked, that it was, from what it wrote as it stopped.
func TestAVolunteersMachineIsKeptToTheirCapAndHours(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	const name, blob = "big/repo", 20 << 20
	if err := f.up.Create(name, []string{"main"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.up.AddBlob(name, "main", blob); err != nil {
		t.Fatal(err)
	}
	// Packed, so that the upstream sends its pack as it is rather than
	// compress 20 MiB first: what the check's time measures is then the
	// transfer, which the cap paces, and git's work around it.
	if err := gittest.Git("", "--git-dir="+filepath.Join(f.up.Dir, name+".git"), "repack", "-a", "-d", "-q"); err != nil {
		t.Fatal(err)
	}
	url := f.up.RepoURL(name)
	key := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git")
	f.writeFile("lists/big.list", url+"\n")
	f.commitCatalog("one repository of 20 MiB")
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken, "--capacity", "0")

	// Its hours begin in two hours (UTC, the node's zone here): it rests.
	now := time.Now().UTC()
	window := now.Add(2*time.Hour).Format("15:04") + "-" + now.Add(3*time.Hour).Format("15:04")
	dir := f.dataDir("volunteer")
	cmd := exec.Command(binary, append([]string{"node", "--mode", "partial", "--name", "volunteer", "--data", dir, "--coordinator", f.grpc,
		"--max-bandwidth", "2MiB/s", "--active-hours", window}, f.nodeCommon()...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	volunteer := startCmd(t, "volunteer", cmd)

	eventually(t, 120*time.Second, "the full node serves the repository with the upstream's refs", func() error {
		want, err := f.up.Refs(name)
		if err != nil {
			return err
		}
		got, err := lsRemote(f.base + "/" + key + ".git")
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("served %v, upstream has %v", got, want)
		}
		return nil
	})
	st := nodeStatus(t, dir)
	if !st.Running || !st.Session || st.Mirrors != 1 || st.MirrorBytes < blob || st.Assigned != 1 || st.FleetRepos != 1 || st.Share != 1 {
		t.Errorf("node status: %+v; want one mirror of at least 20 MiB, the fleet's one repository", st)
	}
	if st.ActiveHours != window || !st.Resting || st.MaxBandwidth != capBytes || st.Standing != (node.Standing{}) {
		t.Errorf("node status: hours %q resting %v cap %d standing %+v; want %q, resting, 2 MiB/s, a clean standing",
			st.ActiveHours, st.Resting, st.MaxBandwidth, st.Standing, window)
	}

	var check, pull time.Duration
	eventually(t, 30*time.Second, "the full node's log has the volunteer's check and its own pull", func() error {
		es, err := logOf(f.base, key)
		if err != nil {
			return err
		}
		check, pull = 0, 0
		for _, e := range es {
			switch {
			case e.Kind == "check" && e.Node == st.NodeID:
				check += time.Duration(e.DurationMs) * time.Millisecond
			case e.Kind == "pull" && e.From == st.NodeID && e.Result == fetchlog.ResultOK:
				pull += time.Duration(e.DurationMs) * time.Millisecond
			}
		}
		if check == 0 || pull == 0 {
			return fmt.Errorf("a check of %v and pulls of %v in %+v", check, pull, es)
		}
		return nil
	})
	st = nodeStatus(t, dir) // the bytes of that check and that pull: the node rests, nothing else moved
	if st.Today.Down < blob || st.Today.Up < blob {
		t.Fatalf("today: %d bytes down, %d up; want the 20 MiB of the clone each way", st.Today.Down, st.Today.Up)
	}
	for _, c := range []struct {
		what  string
		took  time.Duration
		bytes uint64
	}{{"the clone from the upstream", check, st.Today.Down}, {"the full node's pull through the tunnel", pull, st.Today.Up}} {
		want := time.Duration(float64(c.bytes) / capBytes * float64(time.Second))
		ratio := float64(c.took) / float64(want)
		t.Logf("%s: %d bytes in %v; the cap implies %v (ratio %.3f)", c.what, c.bytes, c.took, want, ratio)
		if c.took < want || ratio >= 10 {
			t.Errorf("%s: %d bytes in %v; at 2MiB/s they take %v: want at least that and under 10 times it (ratio %.3f)",
				c.what, c.bytes, c.took, want, ratio)
		}
	}
	// The same clone without the cap, in the same run: the cap is what
	// made the volunteer's slow.
	began := time.Now()
	if err := gittest.Git("", "clone", "--mirror", "-q", url, filepath.Join(t.TempDir(), "uncapped.git")); err != nil {
		t.Fatal(err)
	}
	uncapped := time.Since(began)
	t.Logf("an uncapped clone of the repository took %v, the volunteer's capped check %v", uncapped, check)
	if 2*uncapped > check {
		t.Errorf("an uncapped clone of the repository took %v, the volunteer's capped check %v: want the capped one more than twice as long", uncapped, check)
	}

	// The duration of the partial node's check, as ctl shows it.
	for _, args := range [][]string{{"log", key}, {"show", key}} {
		out, err := runBinary(t, append([]string{"ctl", "--server", f.base}, args...)...)
		if err != nil {
			t.Fatalf("ctl %v: %v\n%s", args, err, out)
		}
		if ms := fmt.Sprintf("%dms", check.Milliseconds()); !strings.Contains(out, ms) {
			t.Errorf("ctl %v does not show the volunteer's check of %s:\n%s", args, ms, out)
		}
	}
	out, err := runBinary(t, "node", "status", "--data", dir)
	if err != nil || !strings.Contains(out, "capped at 2MiB/s") || !strings.Contains(out, "1 of the fleet's 1 repositories (100.0%)") ||
		!strings.Contains(out, window+", resting until") {
		t.Errorf("gitfleet node status (%v):\n%s", err, out)
	}

	// Revoked, the node stops; its status says so.
	volunteer.stopped.Store(true)
	if out, err := runBinary(t, "ctl", "--server", f.base, "--token", apiToken, "nodes", "revoke", fmt.Sprint(st.NodeID),
		"--reason", "a test"); err != nil {
		t.Fatalf("ctl nodes revoke: %v\n%s", err, out)
	}
	select {
	case <-volunteer.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the revoked node did not stop")
	}
	st = nodeStatus(t, dir)
	if st.Running || !st.Standing.Revoked || !strings.Contains(st.Standing.Refused, "a test") || st.Mirrors != 1 {
		t.Errorf("the stopped node's status: %+v; want not running, revoked for a test, its mirror", st)
	}
}

// nodeStatus runs gitfleet node status --json on a node's data directory.
func nodeStatus(t *testing.T, dir string) node.Status {
	t.Helper()
	out, err := runBinary(t, "node", "status", "--data", dir, "--json")
	if err != nil {
		t.Fatalf("gitfleet node status: %v\n%s", err, out)
	}
	var st node.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("gitfleet node status --json: %v\n%s", err, out)
	}
	return st
}

// logOf reads the full node's fetch log of key.
func logOf(base, key string) ([]fetchlog.Entry, error) {
	resp, err := http.Get(base + "/api/v1/log?key=" + key)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var page api.LogPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, err
	}
	return page.Entries, nil
}
