package e2e

import (
	"fmt"
	"testing"
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
