package fullnode

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/pullplan"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	"github.com/gitfleet/gitfleet/internal/repoview"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// backend is the full node's side of the public API (package api).
type backend struct {
	f *Node

	mu    sync.Mutex
	tasks map[string]*taskRun // on-demand checks in flight
}

type taskRun struct {
	key     repokey.Key
	oldRefs map[string]string
	asked   time.Time // when the owner was asked (after the hints it answers)
}

// The backend is every part of the API's Fleet (fleetOf).
var (
	_ api.RepoReader    = (*backend)(nil)
	_ api.CatalogEditor = (*backend)(nil)
	_ api.CheckRunner   = (*backend)(nil)
	_ api.NodeAdmin     = (*backend)(nil)
	_ api.LogReader     = (*backend)(nil)
	_ api.ChangeHinter  = (*backend)(nil)
)

func newBackend(f *Node) *backend {
	return &backend{f: f, tasks: map[string]*taskRun{}}
}

// fleet is the backend as the API's Fleet: all of it.
func (b *backend) fleet() api.Fleet {
	return api.Fleet{Repos: b, Catalog: b, Checks: b, Nodes: b, Log: b, Hints: b, Feeds: b.f, Archive: b}
}

// coordinator returns a client of the coordinator and a context that
// authenticates this node, or an error while the node is not registered.
func (b *backend) coordinator(ctx context.Context) (fleetv1.CoordinatorClient, context.Context, error) {
	return b.f.n.Coordinator(ctx)
}

// repo is key's state st as the API shows it: current and
// staleness_seconds derive from the full node's verified_at, not from the
// owner's report alone.
func (b *backend) repo(key repokey.Key, st *fleetv1.RepoState, now time.Time) api.Repo {
	f := b.f
	b.f.mu.Lock()
	in := b.f.freshInput(key)
	b.f.mu.Unlock()
	state, _ := repostate.Parse(st.GetState()) // the view's: a name it knows
	r := api.Repo{Key: key.String(), UpstreamURL: st.GetUrl(), Owner: st.GetOwner(), State: state,
		LastCheck: msTime(st.GetLastCheckMs()), LastChange: msTime(st.GetLastChangeMs()),
		LastError: st.GetLastError(), ErrorClass: repostate.ClassFromWire(st.GetClass()), Digest: st.GetDigest(), Network: st.GetNetwork(),
		StateSince: msTime(st.GetStateSinceMs()), RenamedTo: st.GetRenamedTo()}
	if parts := st.GetNetworkParts(); parts > 1 {
		r.NetworkParts = parts
	}
	r.Replicas = st.GetReplicas()
	r.ReplicaStates = replicaStates(st, now)
	if f.cfg.PublicURL != "" {
		r.CloneURL = strings.TrimSuffix(f.cfg.PublicURL, "/") + "/" + key.String() + ".git"
	}
	d, held := f.n.Digest(key)
	r.Served = held && f.held(key) && !f.withheld(st, now)
	if broken, ok := f.n.BrokenState(key); ok {
		r.State, r.Served = broken, false // not served until repaired
	}
	if b.f.diskWaiting(key) {
		r.LastError, r.ErrorClass = fullDiskError, repostate.ClassDiskFull
	}
	fr := in.freshness(d, r.Served && d != "")
	r.Current = fr.current()
	if _, broken := f.n.BrokenState(key); !r.Served && !broken && in.elsewhere {
		// Held by another replica, which the relays reach: the tier's
		// truth, not this node's disk.
		r.Served, r.Current = true, in.currentElsewhere()
	}
	if !fr.verifiedAt.IsZero() {
		at := fr.verifiedAt.UTC()
		r.VerifiedAt = &at
		r.StalenessSeconds = max(now.Sub(at).Seconds(), 0)
	}
	return r
}

// replicaStates are st's replicas with their states: those the
// coordinator names in replica_states (not confirmed, or with another
// digest), and the others confirmed and current.
func replicaStates(st *fleetv1.RepoState, now time.Time) []api.ReplicaState {
	if len(st.GetReplicas()) == 0 {
		return nil
	}
	out := make([]api.ReplicaState, 0, len(st.GetReplicas()))
	for _, id := range st.GetReplicas() {
		s := api.ReplicaState{Node: id, Confirmed: true, Current: true, Digest: st.GetDigest()}
		for _, d := range st.GetReplicaStates() {
			if d.GetNode() != id {
				continue
			}
			s.Confirmed, s.Digest = d.GetConfirmed(), d.GetDigest()
			s.Current = s.Confirmed && d.GetDiffersSinceMs() == 0
			if ms := d.GetDiffersSinceMs(); ms > 0 {
				at := time.UnixMilli(ms).UTC()
				s.DiffersSince = &at
				s.Behind = s.Confirmed && now.Sub(at) >= repostate.ReplicaBehindAfter
			}
		}
		out = append(out, s)
	}
	return out
}

// freshInput is what key's freshness depends on; caller holds f.mu.
func (f *Node) freshInput(key repokey.Key) classInput {
	v, _ := f.view.Input(key)
	in := classInput{Input: v}
	in.hinted, in.staleOwner = f.plan.HintPending(key), f.plan.Stale(key)
	in.elsewhere, in.elsewhereCurrent = f.view.HeldElsewhere(key, f.n.ID())
	return in
}

func (b *backend) ListRepos(_ context.Context, f api.RepoFilter) ([]api.Repo, int) {
	now := b.f.clk.Now()
	b.f.mu.Lock()
	page, total := b.f.counts.List(b.f.sorted.Of(b.f.view), b.f.view,
		repoview.Filter{Prefix: f.Prefix, State: f.State, Owner: f.Owner, Network: f.Network, Offset: f.Offset, Limit: f.Limit})
	b.f.mu.Unlock()
	out := make([]api.Repo, 0, len(page))
	for _, m := range page {
		out = append(out, b.repo(m.Key, m.State, now))
	}
	return out, total
}

// GetRepo takes the key the API parsed where the call arrived.
func (b *backend) GetRepo(ctx context.Context, k repokey.Key) (api.RepoDetail, bool) {
	d, _, ok := b.detail(ctx, k)
	return d, ok
}

// Archive lists the archive refs of the full node's copy of k, whose key
// the API parsed where the call arrived.
func (b *backend) Archive(ctx context.Context, k repokey.Key) ([]api.ArchivedRef, error) {
	if !b.f.mirror.Has(k) {
		return nil, fmt.Errorf("archive of %s: %w", k, api.ErrNotFound)
	}
	refs, err := b.f.mirror.Archive(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([]api.ArchivedRef, len(refs))
	for i, a := range refs {
		out[i] = api.ArchivedRef{Name: a.Name, Ref: a.Ref, OID: a.OID, At: a.At}
	}
	return out, nil
}

// keyOf parses a key that the console or the coordinator's answer passes:
// the full node's one check of it, where it arrives. What is not a key
// names no repository. (The API parses its own, where the call arrives.)
func keyOf(s string) (repokey.Key, bool) {
	k, err := repokey.Parse(s)
	return k, err == nil
}

// detail is key's detail, and the refs of the full node's copy (with
// their tips' dates) that it shows, read with one git for-each-ref.
func (b *backend) detail(ctx context.Context, key repokey.Key) (api.RepoDetail, gitcmd.Refs, bool) {
	b.f.mu.Lock()
	st := b.f.view.Get(key)
	b.f.mu.Unlock()
	if st == nil {
		return api.RepoDetail{}, gitcmd.Refs{}, false
	}
	d := api.RepoDetail{Repo: b.repo(key, st, b.f.clk.Now()), Attrs: st.GetAttrs(),
		Checks: st.GetChecks(), Fetches: st.GetFetches()}
	refs, err := b.f.refs(ctx, key)
	if err == nil {
		d.Refs, d.Head = refs.Refs, refs.Head
	}
	d.History = b.history(ctx, key.String())
	return d, refs, true
}

func (b *backend) Known(k repokey.Key) bool {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	return b.f.view.Has(k)
}

func (b *backend) AddRepo(ctx context.Context, url string, attrs map[string]string, update bool) (api.Repo, error) {
	client, ctx, err := b.coordinator(ctx)
	if err != nil {
		return api.Repo{}, err
	}
	resp, err := client.AddRepo(ctx, &fleetv1.AddRepoRequest{Url: url, Attrs: attrs, Update: update})
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument:
			return api.Repo{}, fmt.Errorf("%w: %s", repokey.ErrInvalid, strings.TrimPrefix(status.Convert(err).Message(), repokey.ErrInvalid.Error()+" "))
		case codes.AlreadyExists:
			return api.Repo{}, fmt.Errorf("%w: %s", api.ErrKeyCollision, strings.TrimPrefix(status.Convert(err).Message(), "key_collision: "))
		}
		return api.Repo{}, fmt.Errorf("coordinator: %s", status.Convert(err).Message())
	}
	if resp.GetUrl() != "" {
		url = resp.GetUrl()
	}
	// A repository the fleet mirrors already answers with its state
	// (ok and served, say), not as a new one.
	if k, ok := keyOf(resp.GetKey()); ok {
		b.f.mu.Lock()
		st := b.f.view.Get(k)
		b.f.mu.Unlock()
		if st != nil {
			r := b.repo(k, st, b.f.clk.Now())
			r.UpstreamURL = url
			return r, nil
		}
	}
	return api.Repo{Key: resp.GetKey(), UpstreamURL: url, State: repostate.Pending}, nil
}

func (b *backend) RemoveRepo(ctx context.Context, key repokey.Key) error {
	client, ctx, err := b.coordinator(ctx)
	if err != nil {
		return err
	}
	if _, err := client.RemoveRepo(ctx, &fleetv1.RemoveRepoRequest{Key: key.String()}); err != nil {
		if status.Code(err) == codes.NotFound {
			return api.ErrNotFound
		}
		return fmt.Errorf("coordinator: %s", status.Convert(err).Message())
	}
	return nil
}

// StartFetch takes the key the API parsed where the call or the webhook
// arrived.
func (b *backend) StartFetch(ctx context.Context, k repokey.Key, taskID string) error {
	key := k.String()
	client, cctx, err := b.coordinator(ctx)
	if err != nil {
		return err
	}
	run := &taskRun{key: k}
	if refs, err := b.f.refs(ctx, k); err == nil {
		run.oldRefs = refs.Refs
	}
	// An on-demand check (the operator's, or a webhook's) vouches for
	// what it answers: an owner that reports the repository unchanged is
	// checked against the upstream by the full node itself (taskDone).
	if err := b.f.verifyOnDemand(k); err != nil {
		b.f.log.Warn("on-demand check: change hint not recorded", "key", key, "err", err)
	}
	run.asked = b.f.clk.Now()
	b.mu.Lock()
	b.tasks[taskID] = run
	b.mu.Unlock()
	if _, err := client.FetchNow(cctx, &fleetv1.FetchNowRequest{Key: key, TaskId: taskID}, grpc.WaitForReady(false)); err != nil {
		b.mu.Lock()
		delete(b.tasks, taskID)
		b.mu.Unlock()
		return fmt.Errorf("coordinator: check %s now: %w", key, err)
	}
	b.f.tasks.Running(taskID)
	return nil
}

// CancelFetch stops the on-demand check of key that task taskID asked
// for: the coordinator passes it to the owner, as it passed the check.
func (b *backend) CancelFetch(ctx context.Context, key, taskID string) error {
	b.mu.Lock()
	run := b.tasks[taskID]
	delete(b.tasks, taskID)
	b.mu.Unlock()
	if run == nil {
		return nil // never sent to an owner (or over): nothing to stop
	}
	client, cctx, err := b.coordinator(ctx)
	if err == nil {
		_, err = client.FetchNow(cctx, &fleetv1.FetchNowRequest{Key: key, TaskId: taskID, Cancel: true}, grpc.WaitForReady(false))
	}
	if err != nil {
		b.mu.Lock()
		b.tasks[taskID] = run // still running: its result is still awaited
		b.mu.Unlock()
		return fmt.Errorf("cancel the check of %s: %s", key, status.Convert(err).Message())
	}
	return nil
}

func (b *backend) Nodes(ctx context.Context) ([]api.Node, error) {
	client, ctx, err := b.coordinator(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := client.ListNodes(ctx, &fleetv1.ListNodesRequest{})
	if err != nil {
		return nil, fmt.Errorf("coordinator: %s", status.Convert(err).Message())
	}
	out := make([]api.Node, 0, len(resp.GetNodes()))
	for _, n := range resp.GetNodes() {
		an := api.Node{ID: n.GetId(), Name: n.GetName(), Mode: modeName(n.GetMode()), State: n.GetState(),
			Repos: int(n.GetRepos()), DiskUsed: n.GetDiskUsedBytes(), DiskTotal: n.GetDiskTotalBytes(), Flapping: n.GetFlapping(),
			Unhealthy: n.GetUnhealthy(), Capacity: n.GetCapacity(), EffectiveWeight: n.GetEffectiveWeight(),
			EffectiveGraceSeconds: float64(n.GetEffectiveGraceMs()) / 1000, Mismatches: b.f.mismatchCount(n.GetId()),
			StaleReports: b.f.staleReportCount(n.GetId()), TierRepos: int(n.GetTierRepos()), TierHeldRepos: int(n.GetTierHeldRepos()),
			TierBytes: n.GetTierBytes(), TierHeldBytes: n.GetTierHeldBytes()}
		if ms := n.GetLastHeartbeatMs(); ms > 0 {
			an.LastHeartbeat = time.UnixMilli(ms).UTC()
		}
		if ms := n.GetRevokedAtMs(); ms > 0 {
			an.RevokedReason, an.RevokedAt = n.GetRevokedReason(), time.UnixMilli(ms).UTC()
		}
		for _, h := range n.GetHistory() {
			an.History = append(an.History, api.Transition{From: h.GetFrom(), To: h.GetTo(), At: time.UnixMilli(h.GetAtMs()).UTC()})
		}
		out = append(out, an)
	}
	return out, nil
}

func (b *backend) Catalog(ctx context.Context) (api.CatalogStatus, error) {
	client, ctx, err := b.coordinator(ctx)
	if err != nil {
		return api.CatalogStatus{}, err
	}
	resp, err := client.CatalogStatus(ctx, &fleetv1.CatalogStatusRequest{})
	if err != nil {
		return api.CatalogStatus{}, fmt.Errorf("coordinator: %s", status.Convert(err).Message())
	}
	st := api.CatalogStatus{Commit: resp.GetCommit(), Repos: int(resp.GetRepos()), Problems: int(resp.GetProblems()),
		ProblemLines: resp.GetProblemLines(), Error: resp.GetError(), ErrorClass: repostate.ClassFromWire(resp.GetErrorClass()), ErrorAt: msTime(resp.GetErrorAtMs()), URL: resp.GetUrl(),
		UnderReplicated: int(resp.GetUnderReplicated()), ReplicasBehind: int(resp.GetReplicasBehind())}
	if t := msTime(resp.GetLastFetchMs()); t != nil {
		st.LastFetch = *t
	}
	if t := msTime(resp.GetNextFetchMs()); t != nil {
		st.NextFetch = *t
	}
	if resp.GetPendingCommit() != "" {
		st.Pending = &api.PendingPurge{Commit: resp.GetPendingCommit(), Removed: int(resp.GetPendingRemoved()), Total: int(resp.GetPendingTotal()),
			Keys: resp.GetPendingKeys()}
	}
	return st, nil
}

func (b *backend) ConfirmPurge(ctx context.Context) (string, error) {
	client, ctx, err := b.coordinator(ctx)
	if err != nil {
		return "", err
	}
	resp, err := client.ConfirmPurge(ctx, &fleetv1.ConfirmPurgeRequest{})
	if status.Code(err) == codes.FailedPrecondition {
		return "", api.ErrNothingPending
	}
	if err != nil {
		return "", fmt.Errorf("coordinator: %s", status.Convert(err).Message())
	}
	return resp.GetMessage(), nil
}

func modeName(m fleetv1.Mode) string {
	switch m {
	case fleetv1.Mode_MODE_FULL:
		return "full"
	case fleetv1.Mode_MODE_PARTIAL:
		return "partial"
	}
	return "unknown"
}

// taskDone finishes an on-demand check once the full node serves its
// result: when the owner's mirror moved, only after the pull.
func (b *backend) taskDone(ctx context.Context, d *fleetv1.TaskDone) {
	b.mu.Lock()
	run := b.tasks[d.GetTaskId()]
	delete(b.tasks, d.GetTaskId())
	b.mu.Unlock()
	if run == nil {
		return
	}
	if !d.GetOk() {
		b.f.tasks.Finish(d.GetTaskId(), api.TaskResult{Err: d.GetError(), Class: repostate.ClassFromWire(d.GetClass()), OldRefs: run.oldRefs, NewRefs: run.oldRefs})
		return
	}
	local, _ := b.f.n.Digest(run.key)
	switch b.f.taskAnswer(run.key, run.asked, d.GetDigest()) {
	case pullplan.CheckNow:
		// The owner says "unchanged" after a push heard of: the answer
		// waits for the full node's own question to the upstream.
		if err := b.f.checkUpstream(ctx, run.key, "hint"); err != nil {
			b.f.log.Warn("could not check a hinted change against the upstream", "key", run.key, "err", err)
		}
	case pullplan.CountStale: // its copy was found behind before: nothing to pull
	default:
		if local == d.GetDigest() || b.f.knownStale(run.key, d.GetDigest()) {
			break
		}
		if err := b.f.pullNow(ctx, run.key, d.GetDigest()); err != nil {
			b.f.tasks.Finish(d.GetTaskId(), api.TaskResult{Err: "checked, but the full node could not pull the result: " + err.Error(), Class: pullClass(err),
				OldRefs: run.oldRefs})
			return
		}
	}
	res := api.TaskResult{OldRefs: run.oldRefs}
	if refs, err := b.f.refs(ctx, run.key); err == nil {
		res.NewRefs = refs.Refs
	}
	b.f.tasks.Finish(d.GetTaskId(), res)
}

// msTime is a time in unix ms as the API shows it (0: none).
func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// refEvents turns a mirror's ref change into one event per updated ref.
func refEvents(key repokey.Key, before, after gitcmd.Refs, at time.Time) []api.Event {
	var evs []api.Event
	for ref, oid := range after.Refs {
		if old := before.Refs[ref]; old != oid {
			if old == "" {
				old = api.ZeroID
			}
			evs = append(evs, api.Event{Key: key.String(), Ref: ref, Old: old, New: oid, Time: at})
		}
	}
	for ref, old := range before.Refs {
		if _, ok := after.Refs[ref]; !ok {
			evs = append(evs, api.Event{Key: key.String(), Ref: ref, Old: old, New: api.ZeroID, Time: at})
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].Ref < evs[j].Ref })
	return evs
}

// served announces that the full node's copy of key changed: an event a
// ref, and one for HEAD when it names another branch (Ref "HEAD", Old and
// New the branches).
func (f *Node) served(key repokey.Key, res mirror.Result) {
	var evs []api.Event
	now := f.clk.Now().UTC()
	if res.Changed {
		evs = refEvents(key, res.Before, res.After, now)
	}
	if res.Before.Head != "" && res.After.Head != "" && res.Before.Head != res.After.Head {
		evs = append(evs, api.Event{Key: key.String(), Ref: "HEAD", Old: res.Before.Head, New: res.After.Head, Time: now})
	}
	f.events.Publish(evs...)
}
