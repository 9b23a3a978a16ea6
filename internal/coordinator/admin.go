package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/network"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// overlay is a repository added or removed through the API: it survives
// restarts and wins over the catalog.
type overlay struct {
	URL       string            `json:",omitempty"`
	Fallbacks []string          `json:",omitempty"`
	Attrs     map[string]string `json:",omitempty"`
	Removed   bool              `json:",omitempty"`
}

const bucketOverlay = "overlay"

// pendingTask remembers which full node asked for an on-demand check.
type pendingTask struct {
	node uint32
	at   time.Time
}

// authFull checks that the caller is a full node admitted with the full
// token, and returns its ID.
func (c *Coordinator) authFull(ctx context.Context) (uint32, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	id64, err := strconv.ParseUint(get("x-gitfleet-node"), 10, 32)
	if err != nil {
		return 0, status.Error(codes.Unauthenticated, "missing or bad x-gitfleet-node")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.nodes[uint32(id64)]
	if !secretMatches(rec, get("x-gitfleet-secret")) {
		return 0, status.Error(codes.Unauthenticated, "unknown node or wrong node secret")
	}
	if rec.Revoked {
		return 0, revokedError(rec)
	}
	if !rec.full() {
		return 0, status.Error(codes.PermissionDenied, "only full nodes admitted with the full token may change or read the fleet")
	}
	return rec.ID, nil
}

// AddRepo adds a repository outside the catalog. A URL whose key is held
// with another upstream is refused with AlreadyExists (the key collides:
// replacing the upstream would serve one repository's content under
// another's name); the same upstream again changes nothing, unless the
// request is an update, which replaces the attributes.
func (c *Coordinator) AddRepo(ctx context.Context, req *fleetv1.AddRepoRequest) (*fleetv1.AddRepoResponse, error) {
	if _, err := c.authFull(ctx); err != nil {
		return nil, err
	}
	k, url, err := repokey.Normalize(req.GetUrl(), repokey.Options{AllowPrivate: c.cfg.AllowPrivate, Egress: c.cfg.Egress, Fold: c.cfg.Fold})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	key := k
	if len(req.GetAttrs()) > 64 {
		return nil, status.Error(codes.InvalidArgument, "at most 64 attributes")
	}
	if name, ok := req.GetAttrs()[catalog.AttrNetwork]; ok {
		if err := network.CheckName(name); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "attribute %s: %v", catalog.AttrNetwork, err)
		}
	}
	ov := overlay{URL: url, Attrs: req.GetAttrs()}
	c.mu.Lock()
	if e, held := c.entry(key); held {
		if !sameUpstream(e.URL, url) {
			c.mu.Unlock()
			return nil, status.Errorf(codes.AlreadyExists, "key_collision: %s is held with the upstream %s, not %s; remove it first to change its upstream",
				key, repokey.Redact(e.URL), repokey.Redact(url))
		}
		if !req.GetUpdate() {
			c.mu.Unlock()
			return &fleetv1.AddRepoResponse{Key: key.String(), Url: e.URL}, nil
		}
		ov.URL, ov.Fallbacks = e.URL, e.Fallbacks
	}
	c.overlay[key] = ov
	c.overlayDirty[key] = true
	c.unhold([]repokey.Key{key})
	exists := c.engine.Has(key)
	if exists {
		c.applyChange(nil, nil, []repokey.Key{key})
	} else {
		c.engine.AddKeys(key)
		c.tierTouch(key)
		c.feedKeysChanged([]repokey.Key{key}, nil)
		c.placeDirty = true
		c.applyChange(nil, nil, []repokey.Key{key})
	}
	c.mu.Unlock()
	if err := c.persist(ctx); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	c.log.Info("repository added through the API", "key", key, "url", repokey.Redact(ov.URL), "update", exists)
	return &fleetv1.AddRepoResponse{Key: key.String(), Created: !exists, Url: ov.URL}, nil
}

// sameUpstream tells whether two fetch URLs with one key name one upstream:
// the key already says the host, port and path are one (up to ".git", a
// trailing slash and the case of a host that folds it), so what is left is
// the scheme and the ssh user.
func sameUpstream(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && ua.User.String() == ub.User.String()
}

// RemoveRepo removes a repository and keeps it removed across catalog updates.
func (c *Coordinator) RemoveRepo(ctx context.Context, req *fleetv1.RemoveRepoRequest) (*fleetv1.RemoveRepoResponse, error) {
	if _, err := c.authFull(ctx); err != nil {
		return nil, err
	}
	key, err := repokey.Parse(req.GetKey())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	c.mu.Lock()
	exists := c.engine.Has(key)
	c.mu.Unlock()
	if !exists {
		return nil, status.Error(codes.NotFound, repostate.NotMirrored(key.String()))
	}
	c.mu.Lock()
	c.overlay[key] = overlay{Removed: true}
	c.overlayDirty[key] = true
	c.unhold([]repokey.Key{key})
	c.applyChange(nil, []repokey.Key{key}, nil)
	c.mu.Unlock()
	if err := c.persist(ctx); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	c.log.Info("repository removed through the API", "key", key)
	return &fleetv1.RemoveRepoResponse{}, nil
}

// FetchNow routes an on-demand check to the repository's owner.
func (c *Coordinator) FetchNow(ctx context.Context, req *fleetv1.FetchNowRequest) (*fleetv1.FetchNowResponse, error) {
	from, err := c.authFull(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The engine's Key, if it places the key: a key it does not know is
	// not mirrored, whatever it says.
	key, ok := c.engine.Key(req.GetKey())
	if !ok {
		return nil, status.Error(codes.NotFound, repostate.NotMirrored(req.GetKey()))
	}
	if req.GetCancel() {
		owner, target := c.owner(key)
		return c.cancelCheck(key, req, owner, target)
	}
	if c.engine.Unplaceable(key) {
		return nil, status.Errorf(codes.FailedPrecondition,
			"repository %s is unplaceable: every node refuses its URL (their egress policies); it waits for a node that takes it", req.GetKey())
	}
	if id, ok := c.rideFeedCheck(from, key, req.GetTaskId()); ok {
		return &fleetv1.FetchNowResponse{Owner: id}, nil // the feed's push asked it already
	}
	// Asked for while its first clone waits behind the rest of a new
	// catalog: its assign goes out now, ahead of the check sent below
	// (which the node keeps until the assign arrives).
	if c.engine.Hurry(key) {
		c.decide()
	}
	owner, target := c.owner(key)
	for _, id := range []uint32{owner, target} {
		s := c.sessions[id]
		if id == 0 || s == nil {
			continue
		}
		s.queueCheck(key, req.GetTaskId())
		if req.GetTaskId() != "" {
			c.gcTasks()
			c.tasks[req.GetTaskId()] = pendingTask{node: from, at: c.clk.Now()}
		}
		return &fleetv1.FetchNowResponse{Owner: id}, nil
	}
	return nil, status.Errorf(codes.Unavailable, "the owner of %s (node %d) is not connected; it will be checked when it is back or re-placed", req.GetKey(), owner)
}

// gcTasks forgets task routes older than an hour. Caller holds c.mu.
func (c *Coordinator) gcTasks() {
	if len(c.tasks) < 1024 {
		return
	}
	cutoff := c.clk.Now().Add(-time.Hour)
	for id, t := range c.tasks {
		if t.at.Before(cutoff) {
			delete(c.tasks, id)
		}
	}
}

// taskDone tells the full nodes that asked for the tasks res answers,
// with those that rode on a feed's check it answers. Caller holds c.mu.
func (c *Coordinator) taskDone(key repokey.Key, res *fleetv1.CheckResult) {
	c.answerTasks(res, slices.Concat(res.GetTaskIds(), c.feedCheckDone(key, res)))
}

// answerTasks tells the full nodes that asked for tasks of res. Caller
// holds c.mu.
func (c *Coordinator) answerTasks(res *fleetv1.CheckResult, tasks []string) {
	for _, id := range tasks {
		t, ok := c.tasks[id]
		if !ok {
			continue
		}
		delete(c.tasks, id)
		if s := c.sessions[t.node]; s != nil {
			d := &fleetv1.TaskDone{TaskId: id, Key: res.GetKey(), Ok: res.GetOk(), Error: res.GetError(),
				Digest: res.GetDigest(), Changed: res.GetChanged()}
			if !res.GetOk() {
				d.Class = uint32(resultClass(res))
			}
			s.queueTaskDone(d)
		}
	}
}

// ListNodes describes the fleet.
func (c *Coordinator) ListNodes(ctx context.Context, _ *fleetv1.ListNodesRequest) (*fleetv1.ListNodesResponse, error) {
	if _, err := c.authFull(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := c.engine.Load()
	tier := c.tierLoads()
	resp := &fleetv1.ListNodesResponse{}
	if p := c.pendingPurge(); p != nil {
		resp.PendingPurge = catalog.HeldSummary(p.removed, p.total, p.commit, p.keys) + "; confirm it to apply"
	}
	for _, st := range c.table.Nodes() {
		rec := c.nodes[st.ID]
		n := &fleetv1.NodeInfo{Id: st.ID, Name: st.Name, State: st.State.String(), Repos: uint32(counts[st.ID]),
			Flapping: st.Flapping, Capacity: st.Weight, EffectiveWeight: st.EffectiveWeight,
			EffectiveGraceMs: st.EffectiveGrace.Milliseconds()}
		if !st.LastHeartbeat.IsZero() {
			n.LastHeartbeatMs = st.LastHeartbeat.UnixMilli()
		}
		if rec != nil {
			n.Mode = rec.Mode
		}
		if l, ok := tier.loads[st.ID]; ok {
			n.TierRepos, n.TierHeldRepos = uint32(l.Repos), uint32(l.HeldRepos)
			n.TierBytes, n.TierHeldBytes = uint64(l.Weight)*1024, uint64(l.HeldWeight)*1024 // weights are KiB
		} else if tier.everyone && rec != nil && rec.full() {
			n.TierRepos, n.TierBytes = uint32(c.engine.Len()), c.tierAllBytes()
		}
		if s := c.sessions[st.ID]; s != nil && s.disk != nil {
			n.DiskUsedBytes, n.DiskTotalBytes = s.disk.GetDiskUsedBytes(), s.disk.GetDiskTotalBytes()
			n.Unhealthy = s.disk.GetUnhealthy()
		}
		for _, h := range st.History {
			n.History = append(n.History, &fleetv1.NodeTransition{From: h.From.String(), To: h.To.String(), AtMs: h.At.UnixMilli()})
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	resp.Nodes = append(resp.Nodes, c.revokedNodes()...)
	return resp, nil
}

// ConfirmPurge applies the removals held by purge protection.
func (c *Coordinator) ConfirmPurge(ctx context.Context, _ *fleetv1.ConfirmPurgeRequest) (*fleetv1.ConfirmPurgeResponse, error) {
	if _, err := c.authFull(ctx); err != nil {
		return nil, err
	}
	msg, err := c.confirmPurge(ctx)
	if errors.Is(err, errNoPurge) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &fleetv1.ConfirmPurgeResponse{Message: msg}, nil
}

func (c *Coordinator) loadOverlay(ctx context.Context) error {
	return c.db.Scan(ctx, bucketOverlay, "", func(k string, v []byte) error {
		var ov overlay
		if err := json.Unmarshal(v, &ov); err != nil {
			c.log.Warn("restore: skip unreadable overlay entry", "key", k, "err", err)
			return nil
		}
		c.overlay[storedKey(k)] = ov
		return nil
	})
}

// CatalogStatus describes the applied catalog and a held-back change.
func (c *Coordinator) CatalogStatus(ctx context.Context, _ *fleetv1.CatalogStatusRequest) (*fleetv1.CatalogStatusResponse, error) {
	if _, err := c.authFull(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	resp := &fleetv1.CatalogStatusResponse{Repos: uint32(c.engine.Len()), Url: repokey.Redact(c.cfg.Catalog),
		LastFetchMs: unixMs(c.catalogFetchAt), NextFetchMs: unixMs(c.catalogNextAt), UnderReplicated: uint32(c.underHealthy(now)),
		ReplicasBehind: uint32(len(c.replicasBehind(now)))}
	if c.cat != nil {
		resp.Commit = c.cat.Commit()
		resp.Problems = uint32(c.problems)
		resp.ProblemLines = c.problemLines
	}
	if c.catalogErr != "" {
		resp.Error, resp.ErrorAtMs, resp.ErrorClass = c.catalogErr, c.catalogErrAt.UnixMilli(), uint32(c.catalogClass)
	}
	if p := c.pendingPurge(); p != nil {
		resp.PendingCommit, resp.PendingRemoved, resp.PendingTotal = p.commit, uint32(p.removed), uint32(p.total)
		resp.PendingKeys = p.keys
	}
	return resp, nil
}

// unixMs is t in unix milliseconds, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
