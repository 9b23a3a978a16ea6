package fullnode

import (
	"context"
	"time"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A full node keeps a removed repository's data for cfg.Retention outside
// the served tree (mirror.Retire), so that a re-addition within that time
// brings it back without a clone; a periodic sweep deletes what expired.

// unretireNew brings back the retired copies of the keys that the
// full node does not know yet (re-added repositories).
func (f *Node) unretireNew(keys []repokey.Key) {
	if !f.mirror.AnyRetired() {
		return // the usual case: nothing to look for, key by key
	}
	var fresh []repokey.Key
	f.mu.Lock()
	for _, k := range keys {
		if !f.view.Has(k) {
			fresh = append(fresh, k)
		}
	}
	f.mu.Unlock()
	for _, k := range fresh {
		f.unretire(k)
	}
}

// unretire moves key's retired copy back into the served tree, if there is
// one; the usual pull or check then brings it up to date.
func (f *Node) unretire(key repokey.Key) {
	if !f.mirror.AnyRetired() {
		return
	}
	if f.mirror.Has(key) {
		return
	}
	back, err := f.mirror.Unretire(key)
	if err != nil {
		f.log.Error("bring back a removed repository's data", "key", key, "err", err)
		return
	}
	if !back {
		return
	}
	// Unknown until the first check or pull, which comes at once and
	// fetches only what changed meanwhile.
	f.n.SetDigest(key, "")
	f.log.Info("re-added repository brought back from its removed data, without a clone", "key", key)
}

// sweepLoop deletes retired copies older than the retention, hourly (and
// once at start).
func (f *Node) sweepLoop(ctx context.Context) {
	tick := f.clk.NewTicker(min(time.Hour, max(f.cfg.Retention/4, time.Second)))
	defer tick.Stop()
	for {
		expired, err := f.mirror.SweepRetired(f.cfg.Retention)
		if err != nil {
			f.log.Warn("sweep of removed repositories' data", "err", err)
		}
		for _, k := range expired {
			f.log.Info("removed repository's data deleted: its retention ended", "key", k, "retention", f.cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// repaired notes that key's mirror was copied again from its upstream: if
// the owner's copy differs, pull it as usual.
func (f *Node) repaired(key repokey.Key, digest string) {
	f.mu.Lock()
	if st, ok := f.view.Entry(key); ok && st.Owner() != 0 && st.Owner() != f.n.ID() && st.Digest() != digest {
		f.plan.Queue(key)
	}
	f.mu.Unlock()
	f.kick()
}
