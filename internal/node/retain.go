package node

import (
	"context"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A full node keeps a removed repository's data for cfg.Retention outside
// the served tree (mirror.Retire), so that a re-addition within that time
// brings it back without a clone; a periodic sweep deletes what expired.

// unretireNew brings back the retired copies of the keys in rs that the
// full node does not know yet (re-added repositories).
func (f *fullNode) unretireNew(rs []*fleetv1.RepoState) {
	if !f.n.mirror.AnyRetired() {
		return // the usual case: nothing to look for, key by key
	}
	var fresh []string
	f.mu.Lock()
	for _, r := range rs {
		if !f.view.Has(r.GetKey()) {
			fresh = append(fresh, r.GetKey())
		}
	}
	f.mu.Unlock()
	for _, k := range fresh {
		f.unretire(k)
	}
}

// unretire moves key's retired copy back into the served tree, if there is
// one; the usual pull or check then brings it up to date.
func (f *fullNode) unretire(key string) {
	if !f.n.mirror.AnyRetired() || f.n.mirror.Has(key) {
		return
	}
	back, err := f.n.mirror.Unretire(key)
	if err != nil {
		f.n.log.Error("bring back a removed repository's data", "key", key, "err", err)
		return
	}
	if !back {
		return
	}
	// Unknown until the first check or pull, which comes at once and
	// fetches only what changed meanwhile.
	f.n.setDigest(key, "")
	f.n.log.Info("re-added repository brought back from its removed data, without a clone", "key", key)
}

// sweepLoop deletes retired copies older than the retention, hourly (and
// once at start).
func (f *fullNode) sweepLoop(ctx context.Context) {
	every := min(time.Hour, max(f.n.cfg.Retention/4, time.Second))
	for {
		expired, err := f.n.mirror.SweepRetired(f.n.cfg.Retention)
		if err != nil {
			f.n.log.Warn("sweep of removed repositories' data", "err", err)
		}
		for _, k := range expired {
			f.n.log.Info("removed repository's data deleted: its retention ended", "key", k, "retention", f.n.cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-f.n.clk.After(every):
		}
	}
}

// repaired notes that key's mirror was copied again from its upstream: if
// the owner's copy differs, pull it as usual.
func (f *fullNode) repaired(key, digest string) {
	f.mu.Lock()
	if st, ok := f.view.Entry(key); ok && st.Owner() != 0 && st.Owner() != f.n.id && st.Digest() != digest {
		f.pending[key] = true
		delete(f.retryAt, key)
	}
	f.mu.Unlock()
	f.kick()
}

// serveFailed hears of a failed upload-pack of key: one that failed on the
// mirror's objects makes it verified at once.
func (n *Node) serveFailed(key string, err error) {
	if gitcmd.ClassOf(err) == gitcmd.ClassBadObjects {
		n.verifySoon(key, "a clone")
	}
}
