package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// tierReplicas returns each repository's replicas as the API at base lists
// them, and fails unless it lists at least want repositories.
func tierReplicas(t testing.TB, base string, want int) (map[string][]uint32, error) {
	var list struct {
		Repos []struct {
			Key      string   `json:"key"`
			Replicas []uint32 `json:"replicas"`
		} `json:"repos"`
	}
	if err := getJSON(base+"/api/v1/repos?limit=1000", &list); err != nil {
		return nil, err
	}
	if len(list.Repos) < want {
		return nil, fmt.Errorf("%s lists %d repositories, want %d", base, len(list.Repos), want)
	}
	out := map[string][]uint32{}
	for _, r := range list.Repos {
		out[r.Key] = r.Replicas
	}
	return out, nil
}

// fullNodeIDs returns the IDs of the full nodes that the API at base lists
// as alive, by name.
func fullNodeIDs(base string) (map[string]uint32, error) {
	var body struct {
		Nodes []struct {
			ID    uint32 `json:"id"`
			Name  string `json:"name"`
			Mode  string `json:"mode"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	if err := getJSON(base+"/api/v1/nodes", &body); err != nil {
		return nil, err
	}
	ids := map[string]uint32{}
	for _, n := range body.Nodes {
		if n.Mode == "full" && n.State == "alive" {
			ids[n.Name] = n.ID
		}
	}
	return ids, nil
}

// Three full nodes with --full-replicas 2: the API lists two replicas of
// every repository, on two distinct full nodes; a full node killed loses
// its replicas to the two others once its grace is over.
func TestFullNodesHoldEachRepositoryTwiceAndALostOnesReplicasMove(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 12)
	f.seed(repos, "12 repositories")
	f.coordArgs = []string{"--full-replicas", "2"}
	f.startCoordinator()
	f.tunnelAddr = freeAddr(t)
	f.startNode("full-a", "full", "--http", f.http, "--tunnel", f.tunnelAddr, "--api-token", apiToken)
	f.startNode("full-b", "full", "--http", freeAddr(t), "--tunnel", freeAddr(t), "--api-token", apiToken)
	f.startNode("full-c", "full", "--http", freeAddr(t), "--tunnel", freeAddr(t), "--api-token", apiToken)

	var ids map[string]uint32
	eventually(t, 60*time.Second, "every repository lists two replicas on distinct full nodes", func() error {
		var err error
		if ids, err = fullNodeIDs(f.base); err != nil {
			return err
		}
		if len(ids) != 3 {
			return fmt.Errorf("full nodes %v, want 3", ids)
		}
		all := []uint32{ids["full-a"], ids["full-b"], ids["full-c"]}
		replicas, err := tierReplicas(t, f.base, len(repos))
		if err != nil {
			return err
		}
		for k, r := range replicas {
			if len(r) != 2 || r[0] == r[1] || !slices.Contains(all, r[0]) || !slices.Contains(all, r[1]) {
				return fmt.Errorf("%s: replicas %v, want two of %v", k, r, all)
			}
		}
		return nil
	})
	lost := ids["full-c"]
	replicas, err := tierReplicas(t, f.base, len(repos))
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, r := range replicas {
		if slices.Contains(r, lost) {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("full-c (node %d) holds no replica of %d repositories: its loss tests nothing", lost, len(replicas))
	}

	f.procs["full-c"].kill()
	survivors := []uint32{ids["full-a"], ids["full-b"]}
	eventually(t, 60*time.Second, "past its grace, the lost full node's replicas are on the survivors", func() error {
		replicas, err := tierReplicas(t, f.base, len(repos))
		if err != nil {
			return err
		}
		for k, r := range replicas {
			if !slices.Equal(slices.Sorted(slices.Values(r)), slices.Sorted(slices.Values(survivors))) {
				return fmt.Errorf("%s: replicas %v, want the survivors %v", k, r, survivors)
			}
		}
		return nil
	})
	t.Logf("full-c (node %d) held %d of %d repositories; they moved to the survivors", lost, held, len(replicas))
}
