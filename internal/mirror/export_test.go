package mirror

import (
	"context"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Probe looks at the mirror in dir, for tests that hold copies of mirrors
// outside a store's keys.
var Probe = probe

// SetHookPlaced makes s call f when a clone has been moved into place,
// before it is shared with its pool.
func SetHookPlaced(s *Store, f func(key repokey.Key)) { s.testHookPlaced = f }

// SetHookCut makes s call f when a leaving member's link to its pool has
// been cut, before the member is checked whole without it.
func SetHookCut(s *Store, f func(key repokey.Key)) { s.testHookCut = f }

// SetHookDropped makes s call f when a pool's repack has dropped what no
// member reaches, before the rest of its run.
func SetHookDropped(s *Store, f func(network string)) { s.testHookDropped = f }

// LeaveWithoutDrop is LeaveNetwork without the pool's drop that follows
// it: the pool still holds what only the member that left reached.
func LeaveWithoutDrop(s *Store, key repokey.Key) (string, error) {
	return s.leave(context.Background(), key)
}
