package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/gitfleet/gitfleet/internal/clock"
)

// CompactHistory keeps etcd's history short while the term lasts. etcd
// keeps every revision of every key until it is compacted, and a leader
// rewrites repository states all day: left alone, etcd's database grows
// until it reaches its quota, and then etcd refuses every write. Every
// interval, the leader compacts etcd to the revision it saw one interval
// before, so that at least one interval of history stays for whatever
// reads an older revision (as kube-apiserver does). It returns when ctx
// ends or the term is over; an interval of 0 or less does nothing.
func (t *Term) CompactHistory(ctx context.Context, clk clock.Clock, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	var seen int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.done:
			return
		case <-clk.After(interval):
		}
		next, err := t.store.compact(ctx, seen)
		if err != nil {
			log.Warn("etcd history not compacted; retrying at the next interval", "revision", seen, "err", err)
			continue
		}
		if seen > 0 {
			log.Debug("etcd history compacted", "revision", seen)
		}
		seen = next
	}
}

// compact compacts etcd to revision rev (none when rev is 0), and returns
// the current revision, the next one to compact to. A revision already
// compacted (by etcd's own auto-compaction) is no error.
func (s *Store) compact(ctx context.Context, rev int64) (int64, error) {
	now, err := s.revision(ctx)
	if err != nil {
		return 0, fmt.Errorf("ha: current revision: %w", err)
	}
	if rev > 0 {
		if _, err := s.client.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return 0, fmt.Errorf("ha: compact etcd to revision %d: %w", rev, err)
		}
	}
	return now, nil
}
