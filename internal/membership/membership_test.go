package membership

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/ring"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func info(id uint32) NodeInfo {
	return NodeInfo{ID: id, Name: "node", Weight: 1, Member: true}
}

// quiet is the default config with a heartbeat timeout that the tests about
// other rules never reach.
func quiet() Config {
	cfg := DefaultConfig()
	cfg.HeartbeatTimeout = 1000 * time.Hour
	return cfg
}

// started returns a table started at t0 with the given nodes connected at t0.
func started(cfg Config, ids ...uint32) *Table {
	t := New(cfg, t0)
	for _, id := range ids {
		t.Connect(info(id), t0)
	}
	return t
}

func wantChanges(t *testing.T, what string, got []Change, want ...Change) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b Change) bool {
		return a.ID == b.ID && a.From == b.From && a.To == b.To && a.At.Equal(b.At)
	}) {
		t.Errorf("%s: changes %v, want %v", what, got, want)
	}
}

func wantMembers(t *testing.T, what string, tb *Table, want ...ring.Member) {
	t.Helper()
	if got := tb.Members(); !slices.Equal(got, want) {
		t.Errorf("%s: members %v, want %v", what, got, want)
	}
}

func status(t *testing.T, tb *Table, id uint32) NodeStatus {
	t.Helper()
	for _, s := range tb.Nodes() {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("node %d not in the table", id)
	return NodeStatus{}
}

func TestFirstConnectJoinsAlive(t *testing.T) {
	tb := New(DefaultConfig(), t0)
	wantChanges(t, "connect", tb.Connect(info(1), at(time.Second)), Change{1, Unknown, Alive, at(time.Second)})
	wantChanges(t, "connect again", tb.Connect(info(1), at(2*time.Second)))
	wantMembers(t, "after join", tb, ring.Member{ID: 1, Weight: 1})
}

func TestDisconnectMakesNodeSuspectAtOnce(t *testing.T) {
	tb := started(DefaultConfig(), 1)
	wantChanges(t, "disconnect", tb.Disconnect(1, at(3*time.Second)), Change{1, Alive, Suspect, at(3 * time.Second)})
	wantChanges(t, "second disconnect", tb.Disconnect(1, at(4*time.Second)))
	wantMembers(t, "a suspect node keeps its place", tb, ring.Member{ID: 1, Weight: 1})
}

func TestHeartbeatTimeoutMakesNodeSuspect(t *testing.T) {
	tests := []struct {
		name      string
		heartbeat time.Duration // last heartbeat after t0
		tick      time.Duration
		want      []Change
	}{
		{"just before the timeout", 0, 15*time.Second - time.Nanosecond, nil},
		{"at the timeout", 0, 15 * time.Second, []Change{{1, Alive, Suspect, at(15 * time.Second)}}},
		{"a heartbeat pushes the timeout", 10 * time.Second, 20 * time.Second, nil},
		{"late tick dates the change at the timeout", 10 * time.Second, time.Minute, []Change{{1, Alive, Suspect, at(25 * time.Second)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := started(DefaultConfig(), 1)
			if tt.heartbeat > 0 {
				wantChanges(t, "heartbeat", tb.Heartbeat(1, at(tt.heartbeat)))
			}
			wantChanges(t, "tick", tb.Tick(at(tt.tick)), tt.want...)
		})
	}
}

func TestHeartbeatRevivesSuspectNodeWithOpenSession(t *testing.T) {
	tb := started(DefaultConfig(), 1)
	tb.Tick(at(20 * time.Second))
	wantChanges(t, "heartbeat", tb.Heartbeat(1, at(30*time.Second)), Change{1, Suspect, Alive, at(30 * time.Second)})
}

func TestLateHeartbeatReportsTheMissedTimeoutFirst(t *testing.T) {
	tb := started(DefaultConfig(), 1)
	wantChanges(t, "heartbeat after the timeout, without a tick", tb.Heartbeat(1, at(16*time.Second)),
		Change{1, Alive, Suspect, at(15 * time.Second)},
		Change{1, Suspect, Alive, at(16 * time.Second)})
}

func TestHeartbeatOfUnknownOrDisconnectedNodeIsIgnored(t *testing.T) {
	tb := started(DefaultConfig(), 1)
	tb.Disconnect(1, at(time.Second))
	wantChanges(t, "heartbeat after disconnect", tb.Heartbeat(1, at(2*time.Second)))
	wantChanges(t, "heartbeat of unknown node", tb.Heartbeat(9, at(2*time.Second)))
	if s := status(t, tb, 1); s.State != Suspect {
		t.Errorf("node 1 is %v after a heartbeat without session, want suspect", s.State)
	}
	if len(tb.Nodes()) != 1 {
		t.Errorf("a heartbeat of an unknown node added it: %v", tb.Nodes())
	}
}

func TestReturnWithinGraceKeepsMembership(t *testing.T) {
	tb := started(quiet(), 1, 2)
	tb.Disconnect(1, at(time.Minute))
	wantChanges(t, "tick within grace", tb.Tick(at(10*time.Minute)))
	wantMembers(t, "while suspect", tb, ring.Member{ID: 1, Weight: 1}, ring.Member{ID: 2, Weight: 1})
	wantChanges(t, "reconnect", tb.Connect(info(1), at(10*time.Minute+59*time.Second)), Change{1, Suspect, Alive, at(10*time.Minute + 59*time.Second)})
	wantMembers(t, "after return", tb, ring.Member{ID: 1, Weight: 1}, ring.Member{ID: 2, Weight: 1})
	wantChanges(t, "tick after the old grace", tb.Tick(at(11*time.Minute+time.Second)))
}

func TestGraceEndsSuspicion(t *testing.T) {
	flapping := []time.Duration{0, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute} // four downs in 15 minutes
	tests := []struct {
		name     string
		downs    []time.Duration // each down is followed by a reconnect a minute later, except the last
		lastDown time.Duration
		grace    time.Duration
	}{
		{"stable node: grace", []time.Duration{0}, 0, 10 * time.Minute},
		{"three downs: not flapping", flapping[:3], 10 * time.Minute, 10 * time.Minute},
		{"four downs in an hour: flapping, grace x3", flapping, 15 * time.Minute, 30 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := started(quiet(), 1, 2)
			for i, d := range tt.downs {
				tb.Disconnect(1, at(d))
				if i < len(tt.downs)-1 {
					tb.Connect(info(1), at(d+time.Minute))
				}
			}
			if s := status(t, tb, 1); s.EffectiveGrace != tt.grace {
				t.Errorf("effective grace %v, want %v", s.EffectiveGrace, tt.grace)
			}
			gone := at(tt.lastDown + tt.grace)
			if next, ok := tb.NextDeadline(); !ok || next.After(gone) {
				t.Errorf("NextDeadline %v %v, want a time no later than %v", next, ok, gone)
			}
			wantChanges(t, "tick before the grace ends", tb.Tick(gone.Add(-time.Nanosecond)))
			got := tb.Tick(gone)
			wantChanges(t, "tick at the end of grace", got, Change{1, Suspect, Gone, gone})
			for _, m := range tb.Members() {
				if m.ID == 1 {
					t.Errorf("gone node 1 is still a member: %v", tb.Members())
				}
			}
		})
	}
}

func TestGoneNodeReturnsAlive(t *testing.T) {
	tb := started(quiet(), 1)
	tb.Disconnect(1, t0)
	tb.Tick(at(time.Hour))
	wantMembers(t, "gone", tb)
	wantChanges(t, "return", tb.Connect(info(1), at(2*time.Hour)), Change{1, Gone, Alive, at(2 * time.Hour)})
	wantMembers(t, "returned", tb, ring.Member{ID: 1, Weight: 1})
}

func TestLateTickReportsEachTransitionOnceInTimeOrder(t *testing.T) {
	tb := started(DefaultConfig(), 2, 1)
	tb.Heartbeat(2, at(5*time.Second))
	suspect1, suspect2 := at(15*time.Second), at(20*time.Second)
	week := 7 * 24 * time.Hour
	wantChanges(t, "tick eight days later", tb.Tick(at(8*24*time.Hour)),
		Change{1, Alive, Suspect, suspect1},
		Change{2, Alive, Suspect, suspect2},
		Change{1, Suspect, Gone, suspect1.Add(10 * time.Minute)},
		Change{2, Suspect, Gone, suspect2.Add(10 * time.Minute)},
		Change{1, Gone, Forgotten, suspect1.Add(10*time.Minute + week)},
		Change{2, Gone, Forgotten, suspect2.Add(10*time.Minute + week)},
	)
	wantChanges(t, "next tick", tb.Tick(at(9*24*time.Hour)))
	if n := tb.Nodes(); len(n) != 0 {
		t.Errorf("forgotten nodes still listed: %v", n)
	}
}

func TestFlappingNodeIsWeightedDownUntilStableForAWindow(t *testing.T) {
	cfg := quiet()
	tb := started(cfg)
	tb.Connect(NodeInfo{ID: 1, Weight: 4, Member: true}, t0)
	bounce := func(d time.Duration) {
		tb.Disconnect(1, at(d))
		tb.Connect(NodeInfo{ID: 1, Weight: 4, Member: true}, at(d+time.Second))
	}
	for _, d := range []time.Duration{0, 10 * time.Minute, 20 * time.Minute} {
		bounce(d)
	}
	wantMembers(t, "after three downs", tb, ring.Member{ID: 1, Weight: 4})
	bounce(50 * time.Minute) // the fourth down within an hour
	wantMembers(t, "after four downs", tb, ring.Member{ID: 1, Weight: 2})
	if s := status(t, tb, 1); !s.Flapping || s.EffectiveWeight != 2 || s.EffectiveGrace != 30*time.Minute {
		t.Errorf("status %+v, want flapping with weight 2 and grace 30m", s)
	}
	bounce(100 * time.Minute) // a down while flapping extends it
	if next, ok := tb.NextDeadline(); !ok || next.After(at(160*time.Minute)) {
		t.Errorf("NextDeadline %v %v, want no later than the end of the penalty at %v", next, ok, at(160*time.Minute))
	}
	tb.Tick(at(160*time.Minute - time.Nanosecond))
	wantMembers(t, "less than a window after the last down", tb, ring.Member{ID: 1, Weight: 2})
	tb.Tick(at(160 * time.Minute))
	wantMembers(t, "a stable window after the last down", tb, ring.Member{ID: 1, Weight: 4})
	if s := status(t, tb, 1); s.Flapping || s.EffectiveGrace != 10*time.Minute {
		t.Errorf("status %+v, want not flapping with grace 10m", s)
	}
	bounce(161 * time.Minute)
	wantMembers(t, "one down after recovery", tb, ring.Member{ID: 1, Weight: 4})
}

func TestFlapHistoryIsBounded(t *testing.T) {
	tb := started(quiet(), 1)
	for i := range 40 {
		d := time.Duration(i) * 2 * time.Hour
		tb.Disconnect(1, at(d+time.Minute))
		tb.Connect(info(1), at(d+2*time.Minute))
	}
	h := status(t, tb, 1).History
	if len(h) != HistoryLen {
		t.Fatalf("history has %d transitions, want %d", len(h), HistoryLen)
	}
	if last := h[len(h)-1]; last.To != Alive || !last.At.Equal(at(78*time.Hour+2*time.Minute)) {
		t.Errorf("last transition %+v, want the latest return", last)
	}
}

func TestWarmup(t *testing.T) {
	tests := []struct {
		name        string
		warmupNodes int
		connect     []NodeInfo
		now         time.Duration
		want        bool
	}{
		{"fresh start", 3, nil, 0, false},
		{"just before the warm-up ends", 3, nil, 10*time.Minute - time.Nanosecond, false},
		{"warm-up time over", 3, nil, 10 * time.Minute, true},
		{"enough members alive", 3, []NodeInfo{info(1), info(2), info(3)}, time.Minute, true},
		{"one member short", 3, []NodeInfo{info(1), info(2)}, time.Minute, false},
		{"non-members do not count", 3, []NodeInfo{info(1), info(2), {ID: 3, Weight: 1}}, time.Minute, false},
		{"node count disabled", 0, []NodeInfo{info(1), info(2), info(3)}, time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.WarmupNodes = tt.warmupNodes
			tb := New(cfg, t0)
			for _, n := range tt.connect {
				tb.Connect(n, at(time.Second))
			}
			if got := tb.Placing(at(tt.now)); got != tt.want {
				t.Errorf("Placing = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWarmupEndedByNodesStaysEnded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WarmupNodes = 2
	tb := New(cfg, t0)
	tb.Connect(info(1), at(time.Second))
	tb.Connect(info(2), at(2*time.Second))
	tb.Disconnect(2, at(3*time.Second))
	if !tb.Placing(at(4 * time.Second)) {
		t.Error("placement stopped when a node left after the warm-up ended")
	}
}

func TestRestoreResumesWithoutMovingAnything(t *testing.T) {
	cfg := quiet()
	tb := started(cfg, 1, 2, 3, 4)
	tb.Disconnect(2, at(15*time.Minute))               // suspect
	tb.Disconnect(3, at(time.Minute))                  // gone at 11m
	for _, d := range []time.Duration{0, 1, 2, 3, 4} { // node 4 flaps
		tb.Disconnect(4, at(2*time.Minute+d*time.Minute))
		tb.Connect(info(4), at(2*time.Minute+d*time.Minute+time.Second))
	}
	tb.Tick(at(20 * time.Minute))
	before := tb.Members()
	snap := tb.Snapshot()

	restart := at(25 * time.Minute)
	rt, err := Restore(cfg, snap, restart)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	wantMembers(t, "restored", rt, before...)
	if !rt.Placing(restart) {
		t.Error("a restored table is in warm-up")
	}
	for _, s := range rt.Nodes() {
		switch {
		case s.ID == 3 && (s.State != Gone || !s.Since.Equal(at(11*time.Minute))):
			t.Errorf("node 3 restored as %v since %v, want gone since %v", s.State, s.Since, at(11*time.Minute))
		case s.ID != 3 && (s.State != Suspect || !s.Since.Equal(restart) || s.Connected):
			t.Errorf("node %d restored as %v since %v, want suspect since the restart", s.ID, s.State, s.Since)
		case s.ID == 4 && (!s.Flapping || len(s.History) == 0):
			t.Errorf("node 4 lost its flapping history: %+v", s)
		}
	}
	wantChanges(t, "reconnect within the fresh grace", rt.Connect(info(1), restart.Add(9*time.Minute)), Change{1, Suspect, Alive, restart.Add(9 * time.Minute)})
	wantChanges(t, "end of the fresh grace", rt.Tick(restart.Add(10*time.Minute)), Change{2, Suspect, Gone, restart.Add(10 * time.Minute)})
	wantChanges(t, "end of the flapping node's grace", rt.Tick(restart.Add(30*time.Minute)), Change{4, Suspect, Gone, restart.Add(30 * time.Minute)})
	if !bytes.Equal(rt.Snapshot(), rt.Snapshot()) {
		t.Error("two snapshots of the same table differ")
	}
}

func mustRestore(t *Table, err error) *Table {
	if err != nil {
		panic(err)
	}
	return t
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	tests := map[string]string{
		"not JSON":      `{"version":`,
		"other version": `{"version":2,"nodes":[]}`,
		"unknown state": `{"version":1,"nodes":[{"id":1,"state":"sleepy"}]}`,
		"forgotten":     `{"version":1,"nodes":[{"id":1,"state":"forgotten"}]}`,
		"duplicate ID":  `{"version":1,"nodes":[{"id":1,"state":"alive"},{"id":1,"state":"gone"}]}`,
		"bad weight":    `{"version":1,"nodes":[{"id":1,"state":"alive","weight":-1}]}`,
	}
	for name, data := range tests {
		if _, err := Restore(DefaultConfig(), []byte(data), t0); err == nil {
			t.Errorf("%s: Restore accepted %s", name, data)
		}
	}
}

// The caller keeps a registry of the nodes it gave IDs to, as the
// coordinator does: a forgotten node's record is deleted unless the node
// was revoked, and a revoked one is forgotten by the table at once.
func TestAllocateIDReusesForgottenIDsButNeverARevokedNodesID(t *testing.T) {
	cfg := quiet()
	tb := New(cfg, t0)
	registered := map[uint32]bool{} // ID -> revoked
	forget := func(changes []Change) []Change {
		for _, c := range changes {
			if c.To == Forgotten && !registered[c.ID] {
				delete(registered, c.ID)
			}
		}
		return changes
	}
	for want := uint32(1); want <= 4; want++ {
		if got := AllocateID(registered); got != want {
			t.Fatalf("AllocateID = %d, want %d", got, want)
		}
		registered[want] = false
		tb.Connect(info(want), t0)
	}
	wantChanges(t, "forget", forget(tb.Forget(2, at(time.Second))), Change{2, Alive, Forgotten, at(time.Second)})
	if got := AllocateID(registered); got != 2 {
		t.Errorf("AllocateID after Forget(2) = %d, want 2", got)
	}
	registered[2] = false
	tb.Connect(info(2), at(2*time.Second))
	tb.Disconnect(1, at(2*time.Second))
	forget(tb.Tick(at(2*time.Second + cfg.Grace + cfg.ForgetAfter)))
	if got := AllocateID(registered); got != 1 {
		t.Errorf("AllocateID after node 1 was forgotten = %d, want 1", got)
	}
	registered[1] = false
	tb.Connect(info(1), at(3*time.Second+cfg.Grace+cfg.ForgetAfter))

	// Node 3 is revoked: the table forgets it, its record stays.
	registered[3] = true
	wantChanges(t, "revoke", forget(tb.Forget(3, at(4*time.Second+cfg.Grace+cfg.ForgetAfter))),
		Change{3, Alive, Forgotten, at(4*time.Second + cfg.Grace + cfg.ForgetAfter)})
	if got := AllocateID(registered); got != 5 {
		t.Errorf("AllocateID after node 3 was revoked = %d, want 5 (never a revoked node's ID)", got)
	}
	// Node 5 registers and has not connected yet: the table does not know
	// it, and its ID is taken all the same.
	registered[5] = false
	if got := AllocateID(registered); got != 6 {
		t.Errorf("AllocateID with node 5 registered but not connected = %d, want 6", got)
	}
}

func TestNextDeadline(t *testing.T) {
	cfg := quiet()
	cfg.Warmup = 0
	tests := []struct {
		name  string
		setup func() *Table
		want  time.Time // zero: none
	}{
		{"empty table in warm-up: end of warm-up", func() *Table { return New(quiet(), t0) }, at(10 * time.Minute)},
		{"empty restored table: none", func() *Table { return mustRestore(Restore(cfg, []byte(`{"version":1}`), t0)) }, time.Time{}},
		{"alive node: heartbeat timeout", func() *Table {
			tb := started(DefaultConfig(), 1)
			tb.Tick(at(10 * time.Minute))
			tb.Heartbeat(1, at(10*time.Minute+time.Second))
			return tb
		}, at(10*time.Minute + 16*time.Second)},
		{"suspect node: end of grace", func() *Table {
			tb := started(cfg, 1)
			tb.Disconnect(1, at(time.Minute))
			return tb
		}, at(11 * time.Minute)},
		{"gone node: forget time", func() *Table {
			tb := started(cfg, 1)
			tb.Disconnect(1, t0)
			tb.Tick(at(time.Hour))
			return tb
		}, at(10*time.Minute + 7*24*time.Hour)},
		{"earliest of several nodes", func() *Table {
			tb := started(cfg, 1, 2)
			tb.Tick(at(10 * time.Minute))
			tb.Connect(info(3), at(10*time.Minute+time.Second))
			tb.Disconnect(3, at(10*time.Minute+2*time.Second))
			return tb
		}, at(10*time.Minute + 2*time.Second + 10*time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.setup().NextDeadline()
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Errorf("NextDeadline = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

func TestDeclaredWeightThatIsNotANumberPlacesNothing(t *testing.T) {
	tb := started(DefaultConfig())
	tb.Connect(NodeInfo{ID: 1, Weight: -2, Member: true}, t0)
	tb.Connect(NodeInfo{ID: 2, Weight: math.NaN(), Member: true}, t0)
	tb.Connect(NodeInfo{ID: 3, Weight: math.Inf(1), Member: true}, t0)
	tb.Connect(NodeInfo{ID: 4, Weight: 1, Member: false}, t0)
	wantMembers(t, "bad weights and a non-member", tb)
	if len(tb.Snapshot()) == 0 {
		t.Error("empty snapshot")
	}
}
