package api

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func refEvent(key, ref string) Event {
	return Event{Key: key, Ref: ref, Old: ZeroID, New: strings.Repeat("a", 40), Time: epoch}
}

func ids(evs []Event) []uint64 {
	out := []uint64{}
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

func receive(t *testing.T, sub *Subscription) []Event {
	t.Helper()
	select {
	case batch := <-sub.C:
		return batch
	case <-time.After(30 * time.Second):
		t.Fatal("no batch")
		return nil
	}
}

func TestBrokerNumbersEventsAndDeliversBatchesInOrder(t *testing.T) {
	b := NewBroker(8, 8, slog.New(slog.DiscardHandler))
	sub := b.Subscribe()
	defer sub.Close()
	b.Publish(refEvent("a", "refs/heads/main"), refEvent("a", "refs/tags/v1"))
	b.Publish(refEvent("b", "refs/heads/main"))
	b.Publish() // nothing
	if got := ids(receive(t, sub)); !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("first batch %v", got)
	}
	if got := receive(t, sub); len(got) != 1 || got[0].ID != 3 || got[0].Key != "b" {
		t.Errorf("second batch %+v", got)
	}
}

func TestASlowSubscriberIsDroppedWithoutBlockingPublish(t *testing.T) {
	logs := &syncBuffer{}
	b := NewBroker(8, 2, slog.New(slog.NewTextHandler(logs, nil)))
	slow, fast := b.Subscribe(), b.Subscribe()
	defer fast.Close()
	var fastSeen []uint64
	for range 3 {
		b.Publish(refEvent("a", "refs/heads/main")) // the third does not fit in slow's buffer
		fastSeen = append(fastSeen, ids(receive(t, fast))...)
	}
	if !slices.Equal(fastSeen, []uint64{1, 2, 3}) {
		t.Errorf("fast subscriber got %v", fastSeen)
	}
	var slowSeen []uint64
	for batch := range slow.C { // ends: the channel was closed
		slowSeen = append(slowSeen, ids(batch)...)
	}
	if !slices.Equal(slowSeen, []uint64{1, 2}) {
		t.Errorf("slow subscriber got %v before being dropped", slowSeen)
	}
	if !strings.Contains(logs.String(), "too slow") {
		t.Errorf("no warning logged: %q", logs.String())
	}
	slow.Close() // closing a dropped subscription is harmless
}

func TestResumeReplaysWhatTheRingStillHolds(t *testing.T) {
	tests := []struct {
		name      string
		published int
		lastID    uint64
		want      []uint64
	}{
		{"up to date", 6, 6, []uint64{}},
		{"missed two", 6, 4, []uint64{5, 6}},
		{"missed more than the ring holds", 6, 1, []uint64{3, 4, 5, 6}},
		{"from the start", 6, 0, []uint64{3, 4, 5, 6}},
		{"an ID from before a restart", 6, 100, []uint64{3, 4, 5, 6}},
		{"nothing published yet", 0, 5, []uint64{}},
		{"fewer events than the ring holds", 2, 0, []uint64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBroker(4, 8, slog.New(slog.DiscardHandler))
			for range tt.published {
				b.Publish(refEvent("a", "refs/heads/main"))
			}
			replay, sub := b.Resume(tt.lastID)
			defer sub.Close()
			if got := ids(replay); !slices.Equal(got, tt.want) {
				t.Errorf("replayed %v, want %v", got, tt.want)
			}
			b.Publish(refEvent("a", "refs/heads/next")) // and then live, with no gap
			if got := receive(t, sub); got[0].ID != uint64(tt.published+1) {
				t.Errorf("live event %d, want %d", got[0].ID, tt.published+1)
			}
		})
	}
}

// stream is an open event stream, read line by line.
type stream struct {
	lines  chan string
	cancel context.CancelFunc
}

func openStream(t *testing.T, e *testEnv, lastEventID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/events", nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{lines: make(chan string, 100), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	if first := s.line(t); !strings.HasPrefix(first, ":") {
		t.Fatalf("first line %q, want a comment", first)
	}
	s.line(t)
	return s
}

func (s *stream) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatal("stream ended")
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no line from the stream")
		return ""
	}
}

// event reads one SSE message and checks that its id matches its data.
func (s *stream) event(t *testing.T) Event {
	t.Helper()
	var id string
	var ev Event
	for l := s.line(t); l != ""; l = s.line(t) {
		switch {
		case strings.HasPrefix(l, "id: "):
			id = strings.TrimPrefix(l, "id: ")
		case strings.HasPrefix(l, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ev); err != nil {
				t.Fatalf("data %q: %v", l, err)
			}
		default:
			t.Fatalf("unexpected line %q", l)
		}
	}
	if id != strconv.FormatUint(ev.ID, 10) {
		t.Errorf("SSE id %q for event %d", id, ev.ID)
	}
	return ev
}

func TestEventStreamDeliversRefUpdates(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	s := openStream(t, e, "")
	e.events.Publish(refEvent("github.com/a/b", "refs/heads/main"), Event{Key: "github.com/a/b", Ref: "refs/tags/old", Old: strings.Repeat("b", 40), New: ZeroID, Time: epoch})
	first, second := s.event(t), s.event(t)
	if first.ID != 1 || first.Key != "github.com/a/b" || first.Ref != "refs/heads/main" || first.Old != ZeroID || !first.Time.Equal(epoch) {
		t.Errorf("first event %+v", first)
	}
	if second.ID != 2 || second.Ref != "refs/tags/old" || second.New != ZeroID {
		t.Errorf("second event %+v", second)
	}
}

func TestEventStreamReplaysAfterLastEventID(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	for _, ref := range []string{"refs/heads/a", "refs/heads/b", "refs/heads/c"} {
		e.events.Publish(refEvent("github.com/a/b", ref))
	}
	s := openStream(t, e, "1")
	if got := []uint64{s.event(t).ID, s.event(t).ID}; !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("replayed %v, want [2 3]", got)
	}
	e.events.Publish(refEvent("github.com/a/b", "refs/heads/d"))
	if ev := s.event(t); ev.ID != 4 || ev.Ref != "refs/heads/d" {
		t.Errorf("live event %+v", ev)
	}
}

func TestEventStreamSendsHeartbeats(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	s := openStream(t, e, "")
	beat := make(chan string, 1)
	go func() { beat <- s.line(t) }()
	eventually(t, e.clk, heartbeat, func() bool { return len(beat) == 1 })
	if l := <-beat; l != ": heartbeat" {
		t.Errorf("line %q, want a heartbeat comment", l)
	}
}

func TestEventStreamRefusesABadLastEventID(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	wantError(t, e.do(t, "GET", "/api/v1/events", nil, "Last-Event-ID: yesterday"), http.StatusBadRequest, "Last-Event-ID")
}

func TestEventStreamEndsWhenTheServerCloses(t *testing.T) {
	e := newTestEnv(t, Config{}, newFakeBackend())
	s := openStream(t, e, "")
	e.srv.Close()
	for {
		select {
		case _, ok := <-s.lines:
			if !ok {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the stream is still open")
		}
	}
}
