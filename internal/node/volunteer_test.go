package node

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/hours"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// noon is 12:00 UTC.
var noon = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func newVolunteerNode(t *testing.T, window string, clk clock.Clock) *Node {
	t.Helper()
	w, err := hours.Parse(window, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), Fetchers: 1, ActiveHours: w, MaxBandwidth: 2 << 20},
		slog.New(slog.DiscardHandler), clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.TestHooks().Close)
	return n
}

// TestBackgroundWorkWaitsForTheActiveHours: outside its hours the node
// rests (its heartbeat says so) and its background lanes wait, on the
// fake clock, until the hours begin.
func TestBackgroundWorkWaitsForTheActiveHours(t *testing.T) {
	clk := clock.NewFake(noon)
	n := newVolunteerNode(t, "01:00-07:00", clk)
	if !n.heartbeat().GetResting() {
		t.Fatal("at noon, outside 01:00-07:00: the heartbeat does not say the node rests")
	}
	woke := make(chan time.Time, 1)
	go func() {
		if n.waitActive(context.Background()) {
			woke <- clk.Now()
		}
	}()
	for clk.Timers() == 0 { // the lane waits on the clock
		time.Sleep(time.Millisecond)
	}
	clk.Advance(12*time.Hour + 59*time.Minute) // 00:59
	clk.Advance(time.Minute)                   // 01:00
	// Had it gone on before the hours, it would say when.
	if at := <-woke; !at.Equal(noon.Add(13 * time.Hour)) {
		t.Fatalf("the lane woke at %s, want 01:00", at)
	}
	if n.heartbeat().GetResting() {
		t.Fatal("at 01:00 the heartbeat still says the node rests")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clk.Set(noon.Add(24 * time.Hour))
	if n.waitActive(ctx) {
		t.Fatal("a wait whose context ended says the hours began")
	}
}

// TestTodaysTrafficStartsAgainEachDayAndSurvivesARestart counts bytes up
// and down, on the fake clock, across midnight and a save and load.
func TestTodaysTrafficStartsAgainEachDayAndSurvivesARestart(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 4, 23, 0, 0, 0, time.UTC))
	tr := newTraffic(clk, time.UTC)
	tr.add(false, 1000)
	tr.add(true, 300)
	if got := tr.get(); got != (Traffic{Day: "2026-05-04", Down: 1000, Up: 300}) {
		t.Fatalf("today: %+v", got)
	}
	n := newVolunteerNode(t, "", clk)
	if err := tr.save(context.Background(), n.db); err != nil {
		t.Fatal(err)
	}
	again := newTraffic(clk, time.UTC)
	again.add(false, 5) // counted before the load: both kept
	if err := again.load(context.Background(), n.db); err != nil {
		t.Fatal(err)
	}
	if got := again.get(); got != (Traffic{Day: "2026-05-04", Down: 1005, Up: 300}) {
		t.Fatalf("after a restart: %+v", got)
	}
	clk.Advance(time.Hour) // midnight
	if got := again.get(); got != (Traffic{Day: "2026-05-05"}) {
		t.Fatalf("the next day: %+v", got)
	}
	again.add(true, 7)
	if got := again.get(); got != (Traffic{Day: "2026-05-05", Up: 7}) {
		t.Fatalf("the next day: %+v", got)
	}
}

// TestTheStatusSaysWhatTheVolunteerSet: its hours, whether it rests and
// until when, its cap, its share and its standing, in JSON and for people.
func TestTheStatusSaysWhatTheVolunteerSet(t *testing.T) {
	clk := clock.NewFake(noon)
	n := newVolunteerNode(t, "01:00-07:00", clk)
	n.handle(context.Background(), &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_Assign{Assign: &fleetv1.Assign{FleetRepos: 400,
		Repos: []*fleetv1.Repo{{Key: "example.org/a/b", Url: "https://example.org/a/b"}}}}})
	n.handle(context.Background(), &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_Standing{Standing: &fleetv1.Standing{Mismatches: 1, StaleReports: 2}}})
	n.refusedBy(fleetv1.RevokedError(3, "served forged tips"), "node 3 was revoked: served forged tips")
	st := n.Status()
	if st.ActiveHours != "01:00-07:00" || !st.Resting || !st.Opens.Equal(noon.Add(13*time.Hour)) || st.MaxBandwidth != 2<<20 {
		t.Errorf("hours and cap: %+v", st)
	}
	if st.Assigned != 1 || st.FleetRepos != 400 || st.Share != 1.0/400 {
		t.Errorf("share: %d of %d (%v)", st.Assigned, st.FleetRepos, st.Share)
	}
	if st.Standing != (Standing{Mismatches: 1, StaleReports: 2, Revoked: true, Refused: "node 3 was revoked: served forged tips"}) {
		t.Errorf("standing: %+v", st.Standing)
	}
	var b strings.Builder
	st.Write(&b)
	for _, want := range []string{"1 of the fleet's 400 repositories (0.2%)", "1 mismatches, 2 stale reports, REVOKED: node 3 was revoked",
		"01:00-07:00, resting until", "capped at 2MiB/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the status for people lacks %q:\n%s", want, b.String())
		}
	}
}

// The status is served on <data>/status.sock, a socket only the node's
// user may connect to (mode 0600), also when the data directory's path is
// longer than a socket's address takes; gitfleet node status reads it
// there, and once the node stops, the socket is gone.
func TestTheStatusIsServedOnASocketOnlyItsUserMayOpen(t *testing.T) {
	for _, tt := range []struct{ name, dir string }{
		{"a short data directory", t.TempDir()},
		{"a data directory too long for a socket's address", filepath.Join(t.TempDir(), strings.Repeat("d", 120))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := New(Config{Coordinators: []string{"127.0.0.1:1"}, DataDir: tt.dir, Name: "volunteer"},
				slog.New(slog.DiscardHandler), clock.NewFake(noon), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(n.TestHooks().Close)
			ln, err := listenStatus(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); n.serveStatus(ctx, ln) }()
			sock := filepath.Join(tt.dir, "status.sock")
			fi, err := os.Stat(sock)
			if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
				t.Fatalf("status socket: %v, %v; want a socket of mode 0600", fi, err)
			}
			st, err := ReadStatus(ctx, tt.dir)
			if err != nil || !st.Running || st.Name != "volunteer" {
				t.Fatalf("ReadStatus = %+v, %v; want the running node's", st, err)
			}
			cancel()
			<-done
			if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after the node stopped, its socket: %v", err)
			}
			if entries, _ := os.ReadDir(tt.dir); slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return strings.HasSuffix(e.Name(), ".sock") }) {
				t.Errorf("a socket is left in the data directory: %v", entries)
			}
		})
	}
}
