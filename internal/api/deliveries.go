package api

import (
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
)

// Deliveries are remembered for deliveryTTL, and at most maxDeliveries at
// once, the oldest forgotten first. An entry is a 16-byte digest and a
// time: 24 bytes in the order queue and about as much again in the map,
// both with room to grow; measured, about 85 bytes an entry, so the full
// table costs about 45 MB (TestTheDeliveryTableStaysWithinItsMemoryBound
// holds it under 60 MB). A Gitee delivery takes two entries, one for its
// body and one for its signature. Filling the table within a day takes
// over 6 authenticated deliveries a second, on average; beyond that, the
// window shrinks.
const (
	deliveryTTL   = 24 * time.Hour
	maxDeliveries = 1 << 19
)

// digest names a delivery or a credential in the table: a fixed size,
// whatever a sender puts in a header or a body.
type digest [16]byte

func digestOf(parts ...string) digest {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var d digest
	copy(d[:], h.Sum(nil))
	return d
}

// claim is what identifies a webhook delivery: the delivery itself, and
// the one-time credential it came with, if its kind has one.
type claim struct {
	id      digest
	cred    digest
	oneTime bool // cred is set: a signature that may be used once
}

// verdict is what the table says of a delivery.
type verdict int

const (
	fresh    verdict = iota // not seen: act on it
	replayed                // the same delivery again: answer, do not act
	// reused: its one-time credential came with another delivery before
	// (a Gitee signature with another body): refuse it.
	reused
)

// deliveries remembers the webhook deliveries acted on, so that a replay
// (the host's own retry, or someone resending a captured delivery) is
// answered and not acted on again, and the one-time credentials they
// used. It is bounded in time (an entry is forgotten after ttl) and in
// memory (the oldest entries go first beyond max). It is safe for
// concurrent use.
type deliveries struct {
	clk clock.Clock
	ttl time.Duration
	max int

	mu    sync.Mutex
	seen  map[digest]int64 // when recorded, in Unix nanoseconds
	order []entry          // oldest first
}

type entry struct {
	d  digest
	at int64
}

func newDeliveries(clk clock.Clock, ttl time.Duration, max int) *deliveries {
	return &deliveries{clk: clk, ttl: ttl, max: max, seen: map[digest]int64{}}
}

// check tells what c is and, when it is fresh, records it.
func (d *deliveries) check(c claim) verdict {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clk.Now().UnixNano()
	for len(d.order) > 0 && now-d.order[0].at >= int64(d.ttl) {
		d.dropOldest()
	}
	if _, ok := d.seen[c.id]; ok {
		return replayed
	}
	if c.oneTime {
		if _, ok := d.seen[c.cred]; ok {
			return reused
		}
	}
	d.add(c.id, now)
	if c.oneTime {
		d.add(c.cred, now)
	}
	for len(d.seen) > d.max {
		d.dropOldest()
	}
	return fresh
}

// forget undoes the record of c, a delivery that was refused after all
// (over the host's rate), so that the host's retry is acted on.
func (d *deliveries) forget(c claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen, c.id)
	if c.oneTime {
		delete(d.seen, c.cred)
	}
}

func (d *deliveries) add(k digest, now int64) {
	d.seen[k] = now
	d.order = append(d.order, entry{k, now})
}

func (d *deliveries) dropOldest() {
	// An entry forgotten, then recorded again, is newer than its place
	// in the queue.
	if e := d.order[0]; d.seen[e.d] == e.at {
		delete(d.seen, e.d)
	}
	d.order[0] = entry{}
	d.order = d.order[1:]
}

// deliveryClaim is what identifies one delivery of a kind of forge: the
// identity it carries (hook.DeliveryID), or else its body (a replay
// repeats it; two pushes differ in their before and after commits); and,
// for a kind whose credential covers a timestamp and not the body (Gitee),
// that credential, which may be used once (hook.OneTimeCredential).
func deliveryClaim(kind string, hook *forge.Webhook, r *http.Request, body []byte) claim {
	var c claim
	if id := hook.DeliveryID(r.Header); id != "" {
		c.id = digestOf(kind, "id", id)
	} else {
		c.id = digestOf(kind, "body", string(body))
	}
	if cred, ok := hook.OneTimeCredential(r.Header); ok {
		c.cred = digestOf(kind, "credential", cred)
		c.oneTime = true
	}
	return c
}
