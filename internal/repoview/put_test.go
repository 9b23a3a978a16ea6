package repoview

import (
	"github.com/gitfleet/gitfleet/internal/repokey"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// put stores r under its own key, as the full node does once it has
// parsed the key (a test's keys are its own constants).
func put(v *View, r *fleetv1.RepoState) (Entry, bool) { return v.Put(repokey.Key(r.GetKey()), r) }
