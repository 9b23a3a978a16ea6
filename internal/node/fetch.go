package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/schedule"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// repoState tells the scheduler what the node knows of key's mirror.
func (n *Node) repoState(key repokey.Key) schedule.RepoState {
	d, ok := n.Digest(key)
	if !ok || d == "" {
		return schedule.RepoState{}
	}
	return schedule.RepoState{Cloned: n.mirror.Has(key)}
}

// fetchLoop starts checks as the scheduler makes them due, at most
// cfg.Fetchers at once.
func (n *Node) fetchLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, n.cfg.Fetchers)
	for {
		key, ok, wait := n.sched.Next()
		if ok {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots; n.kick() }()
				n.check(ctx, key)
			}()
			continue
		}
		if wait <= 0 || wait > 5*time.Second {
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-n.wakeup:
		case <-n.clk.After(wait):
		}
	}
}

// check runs one check of sk against its upstream and reports it.
func (n *Node) check(ctx context.Context, sk repokey.Key) {
	key := sk.String() // the books of what is owned hold the key as written
	n.mu.Lock()
	o := n.owned[key]
	var k repokey.Key // the key parsed when it was assigned
	var url, seed string
	var fallbacks, taskIDs []string
	if o != nil {
		k, url, fallbacks, taskIDs, seed = o.key, o.url, o.fallbacks, o.taskIDs, o.seedURL
		o.taskIDs, o.seedURL = nil, ""
	}
	// cctx ends when the operator cancels the check (checkcancel.go).
	cctx, endCheck := n.startCheckLocked(ctx, key, taskIDs)
	n.mu.Unlock()
	defer endCheck()
	if o == nil {
		n.sched.Done(sk, schedule.Outcome{})
		return
	}
	// By the disk's high water: refused, the check ends here and the key
	// leaves the scheduler (handed back, or waiting for room).
	release, ok := n.role.AdmitOwn(k, n.mirror.Has(k))
	if !ok {
		return
	}
	defer release()
	start := n.clk.Now()
	had, prev := n.mirror.Has(k), n.sched.LastCheck(k)
	kind := "check"
	if !had {
		kind = "clone"
	}
	seeded := false
	if seed != "" && !n.mirror.Has(k) {
		// A repository that moved here: clone the full node's copy, then
		// ask the upstream only for what is newer. The full node's URL
		// comes from the coordinator: it goes through the egress policy too.
		// A member of a network clones into its pool: what the pool already
		// holds (a network's earlier members) is not sent again.
		if _, err := n.mirror.SyncIn(cctx, k, seed, n.networkOf(k)); err != nil {
			n.log.Warn("could not clone from the full node; cloning from the upstream", "key", key, "err", err)
		} else {
			seeded = true
			n.log.Info("cloned from the full node", "key", key)
		}
	}
	res, err := n.SyncUpstream(cctx, k, url)
	if seeded {
		res.Cloned, res.Changed, res.Fetched = true, true, true
	}
	tried := url
	for i := 0; err != nil && cctx.Err() == nil && i < len(fallbacks) && gitcmd.ClassOf(err) != gitcmd.ClassDisk && !OverLimit(err); i++ {
		n.log.Info("upstream failed, trying a fallback URL", "key", key, "err", err, "fallback", fallbacks[i])
		tried = fallbacks[i]
		res, err = n.SyncUpstream(cctx, k, tried)
	}
	if ctx.Err() != nil {
		return // shutting down: the check did not happen
	}
	if err != nil && cancelled(cctx) {
		err = fmt.Errorf("%w after %v; the mirror is as it was", ErrCancelled, n.clk.Now().Sub(start).Round(time.Millisecond))
	}
	out := schedule.Outcome{Changed: res.Changed, Fetched: res.Fetched}
	r := &fleetv1.CheckResult{Key: key, CheckedAtMs: start.UnixMilli(), DurationMs: n.clk.Now().Sub(start).Milliseconds(), TaskIds: taskIDs}
	if err != nil {
		out.Class = failureClass(err)
		out.HostThrottled = gitcmd.ClassOf(err) == gitcmd.ClassThrottled
		out.RetryAfter = gitcmd.RetryAfterOf(err)
		r.Error, r.ErrorClass, r.Class = err.Error(), string(gitcmd.ClassOf(err)), uint32(PublicClass(err))
		attrs := []any{"key", key, "class", r.ErrorClass, "err", err}
		if out.RetryAfter > 0 {
			attrs = append(attrs, "retry_after", out.RetryAfter) // the host waits that long, up to 6 h
		}
		n.log.Warn("check failed", attrs...)
		if errors.Is(err, context.DeadlineExceeded) {
			r.ErrorClass = string(gitcmd.ClassTimeout)
		}
		if errors.Is(err, mirror.ErrEmptyAdvertisement) {
			r.ErrorClass = "empty-advertisement"
		}
		if errors.Is(err, ErrCancelled) {
			r.ErrorClass = "cancelled"
		}
		r.RenamedTo = n.renamedTo(cctx, k, tried, err) // rename.go
	} else {
		r.Ok, r.Cloned, r.Fetched, r.Changed, r.Digest = true, res.Cloned, res.Fetched, res.Changed, res.After.Digest()
		r.Head = res.After.Head
		if res.Before.Head != "" && res.After.Head != res.Before.Head {
			n.log.Info("HEAD follows the upstream's default branch", "key", key, "old", res.Before.Head, "new", res.After.Head)
		}
		// The root commits, from which the coordinator tells networks: a
		// recount only after a clone or a ref that went back (mirror.Roots).
		// Only a full node's count: the coordinator trusts no other.
		if n.reg.Mode == fleetv1.Mode_MODE_FULL {
			if roots, rerr := n.mirror.Roots(cctx, k, res); rerr == nil {
				r.Roots, r.RootsKnown = roots, true
			} else {
				n.log.Warn("could not count the mirror's root commits", "key", key, "err", rerr)
			}
		}
		out.ChangeTimes = n.changeTimes(k, res)
		if res.Changed || res.Cloned {
			r.SizeBytes = n.MirrorSize(k)
		}
		if res.Changed || res.Cloned {
			n.SetDigest(k, r.Digest)
			n.log.Info("mirror updated", "key", key, "cloned", res.Cloned, "digest", r.Digest)
		} else if d, _ := n.Digest(k); d != r.Digest {
			n.SetDigest(k, r.Digest)
		}
	}
	n.met.checked(roleName(n.reg.Mode), KindOf(had, res), tried, r.ErrorClass, n.clk.Now().Sub(start), err) // promcollect.go
	if err == nil {
		n.met.rechecked(prev, start)
	}
	n.sched.Done(k, out)
	n.Report(r)
	e := n.WorkEntry(key, kind, start, res, err)
	e.RenamedTo = r.RenamedTo
	n.flog.Append(e)
	if err == nil {
		n.role.Fetched(k, start, res)
	}
}

// Unschedule ends the running check of key without an outcome and stops
// scheduling it (a check its role refused: AdmitOwn).
func (n *Node) Unschedule(key repokey.Key) {
	n.sched.Done(key, schedule.Outcome{})
	n.sched.Remove(key)
}

// PublicClass is the class of err that anyone may see: git's (package
// gitcmd), or the node's own for what git does not tell (an empty
// advertisement, a check cancelled, a timeout of the whole check). Nil is
// repostate.NoClass.
func PublicClass(err error) repostate.Class {
	switch {
	case err == nil:
		return repostate.NoClass
	case errors.Is(err, ErrCancelled):
		return repostate.ClassCancelled
	case errors.Is(err, mirror.ErrEmptyAdvertisement):
		return repostate.ClassEmpty
	case errors.Is(err, repokey.ErrInvalid) && !egress.IsBlocked(err):
		return repostate.ClassInvalid // a URL the egress policy refused says so
	case errors.Is(err, context.DeadlineExceeded):
		return repostate.ClassTimeout
	}
	return gitcmd.ClassOf(err).Public()
}

func failureClass(err error) schedule.FailureClass {
	switch gitcmd.ClassOf(err) {
	case gitcmd.ClassNotFound, gitcmd.ClassDeleted:
		return schedule.NotFound
	case gitcmd.ClassLegal:
		return schedule.Legal
	case gitcmd.ClassAuth:
		return schedule.Auth
	case gitcmd.ClassTLS:
		return schedule.TLS
	case gitcmd.ClassDisk:
		return schedule.Disk
	case gitcmd.ClassBlocked:
		return schedule.Auth // a refused destination stays refused: the long backoff
	case gitcmd.ClassTooLarge, gitcmd.ClassTooManyRefs:
		return schedule.OverLimit
	default:
		return schedule.Transient
	}
}
