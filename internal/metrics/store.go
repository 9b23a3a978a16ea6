package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/internal/store"
)

// StoreWrites is the histogram of the store's write latency, by the role
// that writes (coordinator, node), the backend (bolt, etcd) and the
// operation (put, delete, batch). One per registry: Register returns the
// one already there.
func StoreWrites(reg prometheus.Registerer) *prometheus.HistogramVec {
	return Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gitfleet_store_write_duration_seconds",
		Help:    "Time a write to the state store took (bbolt: synced to disk; etcd: a transaction), by role, backend and operation.",
		Buckets: StoreBuckets(),
	}, []string{"role", "backend", "op"}))
}

// TimedStore is a store whose writes are timed into a StoreWrites
// histogram; reads go straight through.
type TimedStore struct {
	store.Store
	put, del, batch prometheus.Observer
}

// TimeStore wraps s, its writes observed in h with the role and backend
// labels given.
func TimeStore(s store.Store, h *prometheus.HistogramVec, role, backend string) *TimedStore {
	return &TimedStore{Store: s, put: h.WithLabelValues(role, backend, "put"),
		del: h.WithLabelValues(role, backend, "delete"), batch: h.WithLabelValues(role, backend, "batch")}
}

func (t *TimedStore) Put(ctx context.Context, bucket, key string, value []byte) error {
	defer observeSince(t.put, time.Now())
	return t.Store.Put(ctx, bucket, key, value)
}

func (t *TimedStore) Delete(ctx context.Context, bucket, key string) error {
	defer observeSince(t.del, time.Now())
	return t.Store.Delete(ctx, bucket, key)
}

func (t *TimedStore) Batch(ctx context.Context, ops []store.Op) error {
	defer observeSince(t.batch, time.Now())
	return t.Store.Batch(ctx, ops)
}

func observeSince(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }
