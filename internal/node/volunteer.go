package node

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/store"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// What a volunteer says of their machine (issue #26), as the runtime keeps
// it: the cap on its bandwidth paces the connections where the bytes pass
// (Node.bw: the egress dialer's reads, the tunnels' writes); its active
// hours hold back the background work (the scheduler's, the maintenance
// lanes' and the integrity scan's: waitActive); and what the node tells
// its volunteer (status.go): the bytes it moved today, its standing with
// the full nodes, its share of the fleet.

// waitActive waits, on the node's clock, for the volunteer's active hours
// (it returns at once within them, or without them); false if ctx ended
// first.
func (n *Node) waitActive(ctx context.Context) bool {
	for {
		now := n.clk.Now()
		open := n.cfg.ActiveHours.Opens(now)
		if !open.After(now) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-n.clk.After(open.Sub(now)):
		}
	}
}

// resting reports whether the node is outside its volunteer's active
// hours now.
func (n *Node) resting() bool { return !n.cfg.ActiveHours.Active(n.clk.Now()) }

// zone is where the node's day begins and ends: its active hours' zone,
// or the machine's.
func (c Config) zone() *time.Location {
	if loc := c.ActiveHours.Location(); loc != nil {
		return loc
	}
	return time.Local
}

// traffic counts the bytes a node moved today (a day of its zone, by its
// clock): down from upstreams, up to full nodes. It is kept in node.db, so
// that a restart keeps the day's count.
type traffic struct {
	clk clock.Clock
	loc *time.Location

	mu    sync.Mutex
	today Traffic
	until time.Time // when today ends: add, on every read and write, only compares times
}

// Traffic is the bytes a node moved in a day.
type Traffic struct {
	Day  string `json:"day"` // YYYY-MM-DD in the node's zone
	Down uint64 `json:"down"`
	Up   uint64 `json:"up"`
}

func newTraffic(clk clock.Clock, loc *time.Location) *traffic { return &traffic{clk: clk, loc: loc} }

// roll starts the count of the day of now, unless it is the one counted
// (a count loaded from the store). Under mu.
func (t *traffic) roll(now time.Time) {
	at := now.In(t.loc)
	if day := at.Format(time.DateOnly); t.today.Day != day {
		t.today = Traffic{Day: day}
	}
	y, m, d := at.Date()
	t.until = time.Date(y, m, d+1, 0, 0, 0, 0, t.loc)
}

// add counts b bytes, down from an upstream or up to a full node.
func (t *traffic) add(up bool, b int) {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !now.Before(t.until) {
		t.roll(now)
	}
	if up {
		t.today.Up += uint64(b)
	} else {
		t.today.Down += uint64(b)
	}
}

// get returns today's count.
func (t *traffic) get() Traffic {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !now.Before(t.until) {
		t.roll(now)
	}
	return t.today
}

// bucketTraffic holds today's traffic (key "today"), saved with the
// scheduler's state.
const bucketTraffic = "traffic"

func (t *traffic) load(ctx context.Context, db store.Store) error {
	b, ok, err := db.Get(ctx, bucketTraffic, "today")
	if err != nil || !ok {
		return err
	}
	var saved Traffic
	if json.Unmarshal(b, &saved) != nil {
		return nil // a count lost, nothing more
	}
	t.mu.Lock()
	if t.today.Day == "" || t.today.Day == saved.Day {
		t.today.Day = saved.Day
		t.today.Down += saved.Down
		t.today.Up += saved.Up
	}
	t.mu.Unlock()
	return nil
}

func (t *traffic) save(ctx context.Context, db store.Store) error {
	b, _ := json.Marshal(t.get())
	return db.Put(ctx, bucketTraffic, "today", b)
}

// setStanding records what the coordinator says the full nodes counted
// against the node.
func (n *Node) setStanding(st *fleetv1.Standing) {
	n.mu.Lock()
	n.standing.Mismatches, n.standing.StaleReports = st.GetMismatches(), st.GetStaleReports()
	n.mu.Unlock()
}

// refusedBy records the coordinator's refusal of the node (err: its
// answer to a registration).
func (n *Node) refusedBy(err error, msg string) {
	n.mu.Lock()
	n.standing.Refused, n.standing.Revoked = msg, fleetv1.IsRevoked(err)
	n.mu.Unlock()
}

// saveTraffic keeps today's traffic in node.db.
func (n *Node) saveTraffic(ctx context.Context) {
	if err := n.traffic.save(ctx, n.db); err != nil {
		n.log.Warn("could not save today's traffic", "err", err)
	}
}
