package node

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/schedule"
	"github.com/gitfleet/gitfleet/internal/store"
)

// What a node keeps of each repository's schedule, so that a restarted
// node resumes it instead of checking everything at once, and so that the
// freshness policy keeps what it learned of each repository.
type repoMeta struct {
	Sched   schedule.PersistedRepo `json:"s"`
	Changes []int64                `json:"c,omitempty"` // change times seen (unix seconds), oldest first
}

const (
	bucketMeta    = "repometa"
	maxChangeHist = 64
)

func (n *Node) loadMeta(ctx context.Context) error {
	return n.db.Scan(ctx, bucketMeta, "", func(k string, v []byte) error {
		var m repoMeta
		if json.Unmarshal(v, &m) == nil {
			n.meta[k] = &m
		}
		return nil
	})
}

// addToSchedule adds a newly assigned repository with what the node knows
// of it, and resumes its saved schedule. A mirror held on disk with no
// saved schedule (the full node's copy of a repository placed on it, kept
// data brought back) is checked at once, like one to clone: the
// coordinator waits for that check to confirm the node as the owner, and
// shows the repository pending until then.
func (n *Node) addToSchedule(k repokey.Key, host string) {
	key := k.String() // the scheduler's and the saved schedule's books hold the key as written
	n.mu.Lock()
	m := n.meta[key]
	n.mu.Unlock()
	st := n.repoState(k)
	if m != nil {
		st.LastCheck = m.Sched.LastCheck
		for _, t := range m.Changes {
			st.ChangeTimes = append(st.ChangeTimes, time.Unix(t, 0))
		}
		if len(st.ChangeTimes) > 0 {
			st.LastChange = st.ChangeTimes[len(st.ChangeTimes)-1]
		}
	}
	n.sched.Add(k, host, st)
	switch {
	case m != nil && st.Cloned && !m.Sched.Due.IsZero():
		saved := m.Sched
		saved.Key = k
		n.sched.Restore([]schedule.PersistedRepo{saved})
	case st.Cloned:
		n.sched.Urgent(k)
	}
}

// changeTimes returns the commit times of the branches a sync moved (all of
// them after a clone), and records them in the repository's history.
func (n *Node) changeTimes(k repokey.Key, res mirror.Result) []time.Time {
	var ts []int64
	for ref, t := range res.After.Times {
		if res.Cloned || res.Before.Refs[ref] != res.After.Refs[ref] {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	slices.Sort(ts)
	key := k.String()
	n.mu.Lock()
	m := n.meta[key]
	if m == nil {
		m = &repoMeta{}
		n.meta[key] = m
	}
	m.Changes = append(m.Changes, ts...)
	slices.Sort(m.Changes)
	m.Changes = slices.Compact(m.Changes)
	if len(m.Changes) > maxChangeHist {
		m.Changes = m.Changes[len(m.Changes)-maxChangeHist:]
	}
	n.metaDirty[k] = true
	n.mu.Unlock()
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = time.Unix(t, 0)
	}
	return out
}

// persistLoop saves the schedule every interval and once more at the end.
func (n *Node) persistLoop(ctx context.Context) {
	tick := n.clk.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			n.persistSchedule(context.Background())
			n.saveTraffic(context.Background())
			return
		case <-tick.C():
			n.persistSchedule(ctx)
			n.saveTraffic(ctx)
		}
	}
}

func (n *Node) persistSchedule(ctx context.Context) {
	snap := n.sched.Snapshot()
	var ops []store.Op
	n.mu.Lock()
	for _, p := range snap {
		key := p.Key.String() // the saved schedule's books hold the key as written
		m := n.meta[key]
		if m == nil {
			m = &repoMeta{}
			n.meta[key] = m
		}
		if m.Sched != p || n.metaDirty[p.Key] {
			m.Sched = p
			b, _ := json.Marshal(m)
			ops = append(ops, store.Op{Bucket: bucketMeta, Key: key, Value: b})
		}
	}
	for k := range n.metaDirty {
		if _, owned := n.owned[k.String()]; !owned {
			if _, held := n.digests[k]; !held {
				delete(n.meta, k.String())
				ops = append(ops, store.Op{Bucket: bucketMeta, Key: k.String(), Delete: true})
			}
		}
	}
	n.metaDirty = map[repokey.Key]bool{}
	n.mu.Unlock()
	if len(ops) == 0 {
		return
	}
	if err := n.db.Batch(ctx, ops); err != nil {
		n.log.Warn("save schedule", "err", err)
	}
}
