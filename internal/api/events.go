package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ZeroID is the object ID of a ref that does not exist: Old of a created
// ref, New of a deleted one.
const ZeroID = "0000000000000000000000000000000000000000"

// heartbeat is how often an idle event stream gets a comment line, so
// that proxies and clients know it is alive.
const heartbeat = 15 * time.Second

// Event is one ref of one repository that changed and is now servable.
type Event struct {
	ID   uint64    `json:"id"` // set by Publish, increasing
	Key  string    `json:"key"`
	Ref  string    `json:"ref"`
	Old  string    `json:"old"` // ZeroID: created
	New  string    `json:"new"` // ZeroID: deleted
	Time time.Time `json:"time"`

	frame []byte // the SSE message, encoded once by Publish for every stream
}

// Broker fans ref-update events out to subscribers. Publish never blocks:
// a subscriber whose buffer is full is dropped (its channel closed) and can
// resume from the last event it saw, replayed from a bounded ring.
type Broker struct {
	log    *slog.Logger
	buffer int

	mu   sync.Mutex
	seq  uint64  // ID of the last event published
	ring []Event // event with ID n is at n % len(ring)
	subs map[*Subscription]struct{}
}

// Subscription receives batches of events on C, in order. C is closed
// when the subscriber is too slow or closes the subscription.
type Subscription struct {
	C     <-chan []Event
	c     chan []Event
	b     *Broker
	start uint64 // ID of the last event before the subscription
}

// NewBroker returns a broker that keeps the last replay events for
// resuming subscribers (1024 if replay <= 0) and buffers buffer batches
// per subscriber (256 if buffer <= 0).
func NewBroker(replay, buffer int, log *slog.Logger) *Broker {
	if replay <= 0 {
		replay = 1024
	}
	if buffer <= 0 {
		buffer = 256
	}
	return &Broker{log: log, buffer: buffer, ring: make([]Event, replay), subs: map[*Subscription]struct{}{}}
}

// Publish numbers evs and sends them, as one batch, to every subscriber.
func (b *Broker) Publish(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	batch := make([]Event, len(evs))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, ev := range evs {
		b.seq++
		ev.ID = b.seq
		ev.frame = sseFrame(ev, b.log)
		batch[i] = ev
		b.ring[b.seq%uint64(len(b.ring))] = ev
	}
	for sub := range b.subs {
		select {
		case sub.c <- batch:
		default:
			delete(b.subs, sub)
			close(sub.c)
			b.log.Warn("events: subscriber too slow, dropped; it may resume from its last event", "last_event", b.seq)
		}
	}
}

// Subscribe returns a subscription to the events published from now on.
func (b *Broker) Subscribe() *Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subscribeLocked()
}

// Resume returns the events after lastID that are still in the ring, and a
// subscription to those published from now on, with no gap between the
// two. A lastID beyond the newest event comes from before a restart: all
// of the ring is replayed.
func (b *Broker) Resume(lastID uint64) ([]Event, *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := uint64(1)
	if n := uint64(len(b.ring)); b.seq > n {
		first = b.seq - n + 1
	}
	if lastID < b.seq && lastID+1 > first {
		first = lastID + 1
	}
	var replay []Event
	if lastID != b.seq {
		for id := first; id <= b.seq; id++ {
			replay = append(replay, b.ring[id%uint64(len(b.ring))])
		}
	}
	return replay, b.subscribeLocked()
}

func (b *Broker) subscribeLocked() *Subscription {
	c := make(chan []Event, b.buffer)
	sub := &Subscription{C: c, c: c, b: b, start: b.seq}
	b.subs[sub] = struct{}{}
	return sub
}

// Close ends the subscription. It may be called more than once.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s]; ok {
		delete(s.b.subs, s)
		close(s.c)
	}
}

// streamEvents is GET /api/v1/events: server-sent events, one per ref,
// resumable with Last-Event-ID (or ?last_event_id=).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	var (
		replay []Event
		sub    *Subscription
	)
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	if last != "" {
		id, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %q: want an event ID (a number)", last))
			return
		}
		replay, sub = s.events.Resume(id)
	} else {
		sub = s.events.Subscribe()
	}
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// A first line tells the client that it is subscribed.
	if !s.sendSSE(w, rc, appendFrames([]byte(": gitfleet ref updates\n\n"), replay)) {
		return
	}
	beat := s.clk.After(heartbeat)
	for {
		select {
		case batch, ok := <-sub.C:
			if !ok {
				return // too slow: the client reconnects with Last-Event-ID
			}
			buf := appendFrames(nil, batch)
			// Whatever else is waiting goes in the same write.
			for more := true; more && ok; {
				select {
				case batch, ok = <-sub.C:
					buf = appendFrames(buf, batch)
				default:
					more = false
				}
			}
			if !s.sendSSE(w, rc, buf) || !ok {
				return
			}
		case <-beat:
			if !s.sendSSE(w, rc, []byte(": heartbeat\n\n")) {
				return
			}
			beat = s.clk.After(heartbeat)
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// sseFrame encodes ev as an SSE message.
func sseFrame(ev Event, log *slog.Logger) []byte {
	data, err := json.Marshal(ev)
	if err != nil {
		log.Error("events: encoding an event", "key", ev.Key, "err", err)
		return nil
	}
	return fmt.Appendf(nil, "id: %d\ndata: %s\n\n", ev.ID, data)
}

func appendFrames(buf []byte, evs []Event) []byte {
	for _, ev := range evs {
		buf = append(buf, ev.frame...)
	}
	return buf
}

// sseWriteTimeout bounds one write to a stream, so that a client that
// stopped reading cannot pin its handler. Network deadlines are wall-clock
// time by nature, hence time.Now rather than the injected clock.
const sseWriteTimeout = time.Minute

func (s *Server) sendSSE(w http.ResponseWriter, rc *http.ResponseController, p []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout)) // not every writer supports deadlines
	if _, err := w.Write(p); err != nil {
		return false
	}
	return rc.Flush() == nil
}
