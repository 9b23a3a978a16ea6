package api

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/clock"
	"github.com/gitfleet/gitfleet/internal/forge"
)

// deliveries remembers the webhook deliveries acted on, so that a replay
// (the host's own retry, or someone resending a captured delivery) is
// answered and not acted on again. It is bounded in time (an entry is
// forgotten after ttl, past the age at which a delivery is refused anyway)
// and in memory (the oldest entries go first beyond max). It is safe for
// concurrent use.
// maxDeliveries bounds the deliveries remembered (about 80 bytes each).
const maxDeliveries = 100000

type deliveries struct {
	clk clock.Clock
	ttl time.Duration
	max int

	mu    sync.Mutex
	seen  map[string]time.Time
	order []delivery // oldest first
}

type delivery struct {
	id string
	at time.Time
}

func newDeliveries(clk clock.Clock, ttl time.Duration, max int) *deliveries {
	return &deliveries{clk: clk, ttl: ttl, max: max, seen: map[string]time.Time{}}
}

// first records id and tells whether it is new (not seen within ttl).
func (d *deliveries) first(id string) bool {
	sum := sha256.Sum256([]byte(id)) // a fixed size, whatever a sender puts in a header
	id = string(sum[:16])
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clk.Now()
	for len(d.order) > 0 && now.Sub(d.order[0].at) >= d.ttl {
		d.dropOldest()
	}
	if _, ok := d.seen[id]; ok {
		return false
	}
	d.seen[id] = now
	d.order = append(d.order, delivery{id, now})
	for len(d.seen) > d.max {
		d.dropOldest()
	}
	return true
}

func (d *deliveries) dropOldest() {
	if e := d.order[0]; d.seen[e.id].Equal(e.at) {
		delete(d.seen, e.id)
	}
	d.order = d.order[1:]
}

// deliveryID is what identifies one delivery of a kind of forge: the
// first of its delivery headers present, and for a kind that sends none
// (Gitee), the timestamp, token and body (a replay repeats them all; two
// pushes differ in their body). "" when there is nothing to go by.
func deliveryID(hook *forge.Webhook, r *http.Request, body []byte) string {
	for _, h := range hook.DeliveryHeaders {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	if len(hook.DeliveryHeaders) > 0 || hook.TimestampHeader == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(r.Header.Get(hook.TimestampHeader) + "\n" + r.Header.Get(hook.TokenHeader) + "\n" + string(body)))
	return hex.EncodeToString(sum[:16])
}
