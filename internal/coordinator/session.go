package coordinator

import (
	"context"
	"crypto/rand"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/catalog"
	"io"
	"iter"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/bandwidth"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/hours"
	"github.com/gitfleet/gitfleet/internal/membership"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// Register admits a node (see admit for the rules). A new node gets the
// smallest free ID and a secret; a known node proves itself with its
// secret and keeps its ID.
func (c *Coordinator) Register(ctx context.Context, req *fleetv1.RegisterRequest) (*fleetv1.RegisterResponse, error) {
	if req.GetMode() != fleetv1.Mode_MODE_PARTIAL && req.GetMode() != fleetv1.Mode_MODE_FULL {
		return nil, status.Error(codes.InvalidArgument, "mode must be partial or full")
	}
	if len(req.GetName()) > 128 || len(req.GetTunnelAddr()) > 256 || len(req.GetPublicUrl()) > 512 || req.GetCapacity() < 0 || req.GetCapacity() > 1e6 {
		return nil, status.Error(codes.InvalidArgument, "name, tunnel address or capacity out of range")
	}
	if _, err := hours.Parse(req.GetActiveHours(), time.UTC); err != nil || len(req.GetActiveHours()) > 32 {
		return nil, status.Errorf(codes.InvalidArgument, "active hours %.32q: not HH:MM-HH:MM", req.GetActiveHours())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var known *nodeRecord
	if id := req.GetNodeId(); id != 0 {
		if n := c.nodes[id]; secretMatches(n, req.GetNodeSecret()) {
			known = n
		}
	}
	if err := admit(req, known, c.joinTokens, c.cfg.FullToken); err != nil {
		c.log.Warn("registration refused", "node", req.GetNodeId(), "name", req.GetName(), "mode", req.GetMode().String(),
			"err", status.Convert(err).Message())
		return nil, err
	}
	if known == nil && req.GetNodeId() != 0 {
		c.log.Info("unknown node ID or wrong secret: registering as a new node", "id", req.GetNodeId(), "name", req.GetName())
	}
	secret := ""
	rec := known
	if rec == nil {
		secret = rand.Text() // only its hash is kept; earlier (hex) secrets match as well
		// Revoked nodes keep their records, so their IDs stay taken.
		rec = &nodeRecord{ID: membership.AllocateID(c.nodes), SecretHash: fleetv1.SecretHash(secret)}
	}
	wasFull := rec.full()
	next := *rec
	next.Name, next.Mode, next.Capacity, next.TunnelAddr = req.GetName(), req.GetMode(), req.GetCapacity(), req.GetTunnelAddr()
	next.PublicURL = req.GetPublicUrl()
	next.MaxBandwidth, next.ActiveHours = req.GetMaxBandwidth(), req.GetActiveHours()
	next.FullGranted = req.GetMode() == fleetv1.Mode_MODE_FULL // admit checked the full token
	if err := c.saveNode(ctx, &next); err != nil {
		return nil, status.Errorf(codes.Unavailable, "store node: %v", err)
	}
	*rec = next
	c.nodes[rec.ID] = rec
	if known == nil {
		c.queueCredentials(rec.ID)
	}
	c.log.Info("node registered", "node", rec.ID, "name", rec.Name, "mode", rec.Mode.String(), "capacity", rec.Capacity,
		"max_bandwidth", bandwidth.Rate(rec.MaxBandwidth), "active_hours", rec.ActiveHours)
	if rec.full() || wasFull {
		// Partial nodes learn where to open their tunnels.
		for _, s := range c.sessions {
			s.queueWelcome()
		}
	}
	return &fleetv1.RegisterResponse{NodeId: rec.ID, NodeSecret: secret, HeartbeatIntervalMs: c.cfg.HeartbeatInterval.Milliseconds()}, nil
}

// Session is a node's long-lived stream.
func (c *Coordinator) Session(stream fleetv1.Coordinator_SessionServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "the first message of a session must be Hello")
	}
	c.mu.Lock()
	rec := c.nodes[hello.GetNodeId()]
	if !secretMatches(rec, hello.GetNodeSecret()) {
		c.mu.Unlock()
		return status.Error(codes.Unauthenticated, "unknown node or wrong node secret: register again")
	}
	if rec.Revoked {
		c.mu.Unlock()
		return revokedError(rec)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	s := newSession(c, rec, cancel)
	if old := c.sessions[rec.ID]; old != nil {
		old.cancel() // a newer session replaces an older one
	}
	c.sessions[rec.ID] = s
	c.tierDropsBack(s) // tier.go
	now := c.clk.Now()
	c.engine.SetBandwidth(rec.ID, rec.MaxBandwidth) // before it is a member: its first clones are paced
	changes := c.table.Connect(membership.NodeInfo{ID: rec.ID, Name: rec.Name, Weight: rec.Capacity,
		Member: rec.Capacity > 0}, now)
	c.applyChanges(changes)
	c.liftRefusals(rec.ID) // before its assignments: it may take them now
	s.queueWelcome()
	s.queueStanding(c.standingOf(rec.ID))
	// The node gets what it owns or is cloning, and a full node the state
	// of every repository.
	c.engine.Each(func(k repokey.Key, owner, target uint32, sent bool) {
		if owner == rec.ID || target == rec.ID && sent {
			s.queueAssign(k, target == rec.ID)
		}
		if s.full {
			s.sweep = append(s.sweep, k)
		}
	})
	c.decide()
	c.mu.Unlock()
	c.log.Info("session opened", "node", rec.ID, "name", rec.Name)

	sendErr := make(chan error, 1)
	go func() { sendErr <- s.sendLoop(ctx, stream) }()
	// The session ends when the node's stream does, or as soon as ctx
	// does (a newer session, or the end of a leader's term): a Recv still
	// waiting then returns when the handler has, and what it got is
	// dropped, as the session is no longer the node's.
	recvc := make(chan error, 1)
	go func() { recvc <- c.recvLoop(rec.ID, s, stream) }()
	var recvErr error
	select {
	case recvErr = <-recvc:
	case <-ctx.Done():
		recvErr = ctx.Err()
	}

	cancel()
	err = <-sendErr
	c.mu.Lock()
	c.sessionClosed(s)
	cut := s.endError()
	c.mu.Unlock()
	c.log.Info("session closed", "node", rec.ID, "recv", recvErr, "send", err)
	if cut != nil {
		return cut
	}
	if recvErr == io.EOF {
		return nil
	}
	return recvErr
}

// sessionClosed ends s, unless a newer session of its node replaced it:
// the node is disconnected, and the tier drops s did not send wait for
// its next session. Caller holds c.mu.
func (c *Coordinator) sessionClosed(s *session) {
	if c.sessions[s.id] != s {
		return
	}
	delete(c.sessions, s.id)
	for k := range s.tierDrop {
		c.tierDropAway(s.id, k, true)
	}
	c.applyChanges(c.table.Disconnect(s.id, c.clk.Now()))
}

func (c *Coordinator) recvLoop(id uint32, s *session, stream fleetv1.Coordinator_SessionServer) error {
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.sessions[id] != s {
			c.mu.Unlock()
			return status.Error(codes.Aborted, "replaced by a newer session")
		}
		switch m := msg.Msg.(type) {
		case *fleetv1.NodeMessage_Heartbeat:
			c.heartbeat(id, s, m.Heartbeat)
		case *fleetv1.NodeMessage_Inventory:
			c.inventory(id, s, m.Inventory)
			c.applyChanges(c.table.Heartbeat(id, c.clk.Now()))
		case *fleetv1.NodeMessage_HandBack:
			var keys []repokey.Key
			for _, ks := range m.HandBack.GetKeys() {
				if k, ok := c.engine.Key(ks); ok { // a key the engine does not place is nobody's to hand back
					keys = append(keys, k)
				}
			}
			c.log.Info("node handed repositories back: its disk is full", "node", id, "repos", len(keys))
			c.engine.HandBack(id, keys...)
			c.placeDirty = true
			c.decide()
		case *fleetv1.NodeMessage_Results:
			for _, r := range m.Results.GetResults() {
				c.result(id, r)
			}
			c.applyChanges(c.table.Heartbeat(id, c.clk.Now()))
		default:
			c.log.Warn("unexpected message from node", "node", id)
		}
		c.mu.Unlock()
	}
}

// heartbeat records a node's heartbeat: it is alive, its disk's use, and
// whether it rests (outside its volunteer's active hours). Caller holds
// c.mu.
func (c *Coordinator) heartbeat(id uint32, s *session, hb *fleetv1.Heartbeat) {
	c.applyChanges(c.table.Heartbeat(id, c.clk.Now()))
	s.disk = hb
	c.tierDisk(id, hb.GetDiskTotalBytes()) // tier.go
	if hb.GetDiskTotalBytes() > 0 {
		c.engine.SetDisk(id, hb.GetDiskUsedBytes(), hb.GetDiskTotalBytes())
	}
	c.engine.SetResting(id, hb.GetResting())
	c.decide()
}

// inventory reconciles what a partial node holds with what it should hold:
// the engine keeps what the node owns or is moving to it (no re-clone) and
// drops the rest. Before the catalog is loaded the inventory waits, so that
// nothing is dropped for not being known yet. Full nodes keep every copy:
// removals reach them as RepoRemoved, and a full node that holds a key the
// fleet no longer has (removed while it was away, when the RepoRemoved went
// to no session) is told so once the catalog is loaded. Caller holds c.mu.
func (c *Coordinator) inventory(id uint32, s *session, inv *fleetv1.Inventory) {
	for _, h := range inv.GetRepos() {
		key, err := repokey.Parse(h.GetKey())
		if err != nil {
			c.log.Warn("inventory: a node holds a mirror whose key is not valid; ignored", "node", id, "key", h.GetKey(), "err", err)
			continue
		}
		s.held = append(s.held, key)
		if s.full {
			c.tierConfirm(id, key)                               // tier.go
			c.replicaReport(id, key, h.GetDigest(), c.clk.Now()) // replicastate.go
			continue
		}
		if owner, _ := c.owner(key); owner == id && h.GetDigest() != "" && c.statusOf(key).Digest() == "" {
			if !c.statusOf(key).setDigest(h.GetDigest()) {
				c.log.Warn("inventory: ignored a malformed digest", "node", id, "key", key)
			}
			c.dirty[key] = true
		}
	}
	if c.cat != nil {
		c.applyHeldOf(s)
	}
}

// statusOf returns key's status, created on first use under the engine's
// copy of key (a million statuses share their keys with the catalog).
// Caller holds c.mu.
func (c *Coordinator) statusOf(key repokey.Key) *repoStatus {
	r := c.status[key]
	if r == nil {
		if k, ok := c.engine.Key(key.String()); ok {
			key = k
		}
		r = &repoStatus{}
		c.status[key] = r
	}
	return r
}

// applyHeldOf gives the engine what a session's node said it holds.
// Caller holds c.mu.
func (c *Coordinator) applyHeldOf(s *session) {
	if len(s.held) == 0 {
		return
	}
	if s.full {
		for _, k := range s.held {
			if !c.engine.Has(k) {
				s.queueRemoved(k)
			}
		}
		s.held = nil
		return
	}
	c.engine.Hold(s.id, s.held...)
	s.held = nil
	c.placeDirty = true
	c.decide()
}

// applyHeld applies the inventories that waited for the catalog. Caller
// holds c.mu.
func (c *Coordinator) applyHeld() {
	for _, s := range c.sessions {
		c.applyHeldOf(s)
	}
}

// result records a check result. Caller holds c.mu.
func (c *Coordinator) result(id uint32, res *fleetv1.CheckResult) {
	key, ok := c.engine.Key(res.GetKey()) // a result of a key the engine does not place is stale
	if !ok {
		return
	}
	defer c.taskDone(key, res)
	if res.GetServed() {
		// A full node's pull: it holds the repository (tier.go), and the
		// roots it found make fork networks.
		if res.GetOk() {
			c.tierConfirm(id, key)
			c.replicaReport(id, key, res.GetDigest(), c.clk.Now())
			c.reportedSize(id, c.isFull(id), key, res.GetSizeBytes()) // tiersize.go
		}
		if res.GetRootsKnown() {
			c.networkRoots(id, key, res.GetRoots())
			c.decide()
		}
		return
	}
	if !res.GetOk() && res.GetErrorClass() == errorClassRefused {
		c.refused(id, key, res) // refuse.go
		return
	}
	owner, target := c.owner(key)
	switch {
	case id == target && res.GetOk():
		c.engine.Confirm(id, key) // the move is done: the old owner drops it
		c.placeDirty = true
		c.decide()
	case id == target && owner != 0:
		c.engine.CloneFailed(id, key) // retried later; the owner keeps serving
		c.decide()
		return
	case id == target:
		c.engine.CloneFailed(id, key) // nobody has it yet: show why
		c.decide()
	case id != owner:
		return // a stale result from a former owner
	}
	if res.GetOk() {
		c.reportedSize(id, c.isFull(id), key, res.GetSizeBytes())
	}
	if res.GetOk() && res.GetRootsKnown() {
		// A full node that owns key reports its roots on its own checks
		// (networkRoots trusts a full node's alone).
		c.networkRoots(id, key, res.GetRoots())
		c.decide()
	}
	r := c.statusOf(key)
	at := res.GetCheckedAtMs()
	was := r.state
	defer func() {
		if r.state != was {
			r.since = at // the reason's first sight
		}
	}()
	r.lastCheck = at
	r.lastDuration = packMs(res.GetDurationMs())
	r.checks = add32(r.checks)
	if res.GetFetched() {
		r.fetches = add32(r.fetches)
	}
	if res.GetOk() {
		head := c.headName(res.GetHead())
		if res.GetChanged() || r.Digest() != res.GetDigest() || (head != "" && r.head != "" && head != r.head) {
			r.lastChange = at
		}
		if head != "" {
			r.head = head
		}
		old := r.Digest()
		if !r.setDigest(res.GetDigest()) {
			c.log.Warn("result: ignored a malformed digest", "node", id, "key", key)
		}
		if r.Digest() != old {
			c.replicaDigestChanged(key, old, c.clk.Now()) // replicastate.go
		}
		r.state, r.lastError, r.class, r.failures, r.notFound = repostate.OK, "", repostate.NoClass, 0, 0
	} else {
		r.failures = add16(r.failures)
		r.setError(fmt.Sprintf("%s: %s", res.GetErrorClass(), res.GetError()), c.errs, key)
		r.class = resultClass(res)
		r.state = repostate.Failing
		r.notFound = add8(r.notFound)
		if r.class != repostate.ClassNotFound {
			r.notFound = 0
		}
		// Gone, for its reason: the owner rechecks it daily; the full
		// node keeps serving its copy for --retention (not a legal one).
		switch {
		case r.class == repostate.ClassLegal:
			r.state = repostate.Legal
		case int(r.notFound) >= repostate.GoneAfter && res.GetErrorClass() == string(gitcmd.ClassDeleted):
			r.state = repostate.Deleted
		case int(r.notFound) >= repostate.GoneAfter:
			r.state = repostate.Gone
		}
		if st, ok := limitState(r.class); ok {
			r.state = st
		}
	}
	c.checkRenamed(key, res.GetOk(), res.GetRenamedTo(), at) // renames.go
	c.dirty[key] = true
	c.broadcastState(key)
}

// session is the coordinator's side of one node's stream. Outgoing work is
// kept as per-key pending operations, so that a burst of changes to one
// repository is coalesced and memory is bounded by the number of keys.
type session struct {
	c      *Coordinator
	id     uint32
	full   bool
	cancel context.CancelFunc
	disk   *fleetv1.Heartbeat

	// guarded by c.mu
	welcome bool
	assign  map[repokey.Key]assignment
	drop    map[repokey.Key]bool
	states  map[repokey.Key]bool
	// sweep is every key whose state a full node is sent in bulk (at the
	// session's start, after a whole catalog is placed), in turn from
	// sweepAt: a list of a million keys costs a third of a set of them,
	// and is read in order. states has the keys that changed since, sent
	// first.
	sweep   []repokey.Key
	sweepAt int
	removed map[repokey.Key]bool
	// tierDrop: repositories the full tier no longer places on this full
	// node, with enough confirmed replicas without it (tier.go).
	tierDrop map[repokey.Key]bool
	held     []repokey.Key // inventory waiting for the catalog
	// checks is the queue of checks asked of the node: one entry a key
	// (in checkOrder, the order they were first asked), which a second
	// ask merges into, so that it is bounded by the keys as assign is.
	checks     map[repokey.Key]*queuedCheck
	checkOrder []repokey.Key
	cancels    []*fleetv1.CheckNow
	hints      []*fleetv1.ChangeHint
	// feedDirty: the feeds' status is to be sent (feed.go).
	feedDirty bool
	done      []*fleetv1.TaskDone
	// Full nodes: send every node's credential (credsAll), or those of
	// the nodes in creds.
	credsAll bool
	creds    map[uint32]bool
	revoked  string // the reason, once the node was revoked
	// standing is what full nodes counted against the node, to send
	// (nil: nothing new).
	standing *fleetv1.Standing

	signal chan struct{}
}

func newSession(c *Coordinator, rec *nodeRecord, cancel context.CancelFunc) *session {
	return &session{c: c, id: rec.ID, full: rec.full(), cancel: cancel,
		assign: map[repokey.Key]assignment{}, drop: map[repokey.Key]bool{}, states: map[repokey.Key]bool{}, removed: map[repokey.Key]bool{}, tierDrop: map[repokey.Key]bool{},
		checks: map[repokey.Key]*queuedCheck{}, creds: map[uint32]bool{}, signal: make(chan struct{}, 1)}
}

func (s *session) kick() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// queueWelcome queues a Welcome and, to a full node, every credential.
func (s *session) queueWelcome() { s.welcome = true; s.credsAll = s.full; s.feedDirty = true; s.kick() }

// queueFeedStatus makes the next batch carry the feeds' status.
func (s *session) queueFeedStatus() { s.feedDirty = true; s.kick() }

// assignment is a pending Assign of one key.
type assignment struct {
	urgent bool
	seed   bool // clone from a full node's copy
}

func (s *session) queueAssign(key repokey.Key, urgent bool) { s.queueAssignSeed(key, urgent, false) }

func (s *session) queueAssignSeed(key repokey.Key, urgent, seed bool) {
	delete(s.drop, key)
	a := s.assign[key]
	s.assign[key] = assignment{urgent: a.urgent || urgent, seed: a.seed || seed}
	s.kick()
}

func (s *session) queueDrop(key repokey.Key) {
	delete(s.assign, key)
	s.drop[key] = true
	s.kick()
}

// queueTierDrop tells the full node it may delete its copy of key; keep
// false takes back a drop not sent yet (the tier placed key on it again).
func (s *session) queueTierDrop(key repokey.Key, drop bool) {
	if !drop {
		delete(s.tierDrop, key)
		return
	}
	s.tierDrop[key] = true
	s.kick()
}

func (s *session) queueState(key repokey.Key) {
	delete(s.removed, key)
	s.states[key] = true
	s.kick()
}

// queueSweep queues the state of every key of keys (every key of the
// catalog), in bulk: it replaces a sweep under way, which it covers.
func (s *session) queueSweep(keys iter.Seq[repokey.Key]) {
	s.sweep, s.sweepAt = s.sweep[:0], 0
	for k := range keys {
		delete(s.removed, k)
		s.sweep = append(s.sweep, k)
	}
	s.kick()
}

// queuedCheck is the check of one key waiting to be sent: the newest push
// a forge's feed saw (0: none) and the tasks it answers.
type queuedCheck struct {
	pushed int64 // unix seconds
	tasks  []string
}

// queueCheck asks the node for an urgent check of key, answering task
// taskID ("": none). A check of key already queued takes the task: the
// node runs one check for both.
func (s *session) queueCheck(key repokey.Key, taskID string) {
	s.queueCheckPushed(key, taskID, time.Time{})
}

// queueCheckPushed asks the node for an urgent check of key, which a
// forge's feed says was pushed at pushed (zero: no push known), answering
// task taskID ("": none). A check of key already queued is merged with
// it: the newest push, and every task.
func (s *session) queueCheckPushed(key repokey.Key, taskID string, pushed time.Time) {
	q := s.checks[key]
	if q == nil {
		q = &queuedCheck{}
		s.checks[key] = q
		s.checkOrder = append(s.checkOrder, key)
	}
	if !pushed.IsZero() {
		q.pushed = max(q.pushed, pushed.Unix())
	}
	if taskID != "" && !slices.Contains(q.tasks, taskID) {
		q.tasks = append(q.tasks, taskID)
	}
	s.kick()
}

// queueHint tells a full node of a push a forge's feed saw.
func (s *session) queueHint(h *fleetv1.ChangeHint) {
	if len(s.hints) < maxQueuedHints {
		s.hints = append(s.hints, h)
		s.kick()
	}
}

// maxQueuedHints bounds the hints waiting for a slow full node; a hint
// lost is a push the owner's check and the full node's spot checks still
// find.
const maxQueuedHints = 100_000

// queueCancel tells the node to stop the check of key that task taskID
// asked for. A task whose check is still queued is taken out of it
// instead: the node never hears of it (and a check left without a task or
// a push is not sent).
func (s *session) queueCancel(key repokey.Key, taskID string) {
	if q := s.checks[key]; q != nil {
		if i := slices.Index(q.tasks, taskID); i >= 0 {
			q.tasks = slices.Delete(q.tasks, i, i+1)
			if len(q.tasks) == 0 && q.pushed == 0 {
				delete(s.checks, key)
				s.checkOrder = slices.DeleteFunc(s.checkOrder, func(k repokey.Key) bool { return k == key })
			}
			return
		}
	}
	s.cancels = append(s.cancels, &fleetv1.CheckNow{Key: key.String(), TaskId: taskID, Cancel: true})
	s.kick()
}

func (s *session) queueTaskDone(d *fleetv1.TaskDone) {
	s.done = append(s.done, d)
	s.kick()
}

// queueStanding makes the next batch tell the node its standing (nil:
// nothing to tell).
func (s *session) queueStanding(st *fleetv1.Standing) {
	if st != nil {
		s.standing = st
		s.kick()
	}
}

func (s *session) queueRemoved(key repokey.Key) {
	delete(s.states, key)
	delete(s.tierDrop, key) // a removal deletes it anyway
	s.removed[key] = true
	s.kick()
}

// next builds the next batch of messages. Caller holds c.mu.
func (s *session) next() []*fleetv1.CoordinatorMessage {
	c := s.c
	n := c.cfg.BatchSize
	var out []*fleetv1.CoordinatorMessage
	if s.welcome {
		s.welcome = false
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_Welcome{Welcome: &fleetv1.Welcome{
			NodeId: s.id, HeartbeatIntervalMs: c.cfg.HeartbeatInterval.Milliseconds(), TunnelAddrs: c.tunnelAddrs()}}})
	}
	if nc := s.credentials(); nc != nil {
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_NodeCredentials{NodeCredentials: nc}})
	}
	for _, ch := range s.checksToSend() {
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_CheckNow{CheckNow: ch}})
	}
	if s.feedDirty {
		s.feedDirty = false
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_FeedStatus{FeedStatus: c.feedStatus(s.full)}})
	}
	for _, h := range s.hints {
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_ChangeHint{ChangeHint: h}})
	}
	s.hints = nil
	for _, d := range s.done {
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_TaskDone{TaskDone: d}})
	}
	s.done = nil
	if s.standing != nil {
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_Standing{Standing: s.standing}})
		s.standing = nil
	}
	if len(s.drop) > 0 {
		keys := keyStrings(take(s.drop, n))
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_Drop{Drop: &fleetv1.Drop{Keys: keys}}})
	}
	if len(s.removed) > 0 {
		keys := keyStrings(take(s.removed, n))
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_RepoRemoved{RepoRemoved: &fleetv1.RepoRemoved{Keys: keys}}})
	}
	if len(s.assign) > 0 {
		a := &fleetv1.Assign{FleetRepos: uint32(c.engine.Len())}
		seedBase := c.seedBase(s.id)
		now := c.clk.Now()
		for k, as := range s.assign {
			if len(a.Repos) >= n {
				break
			}
			delete(s.assign, k)
			if e, ok := c.entry(k); ok {
				_, pool, _ := c.engine.Network(k)
				r := &fleetv1.Repo{Key: k.String(), Url: e.URL, FallbackUrls: e.Fallbacks, Urgent: as.urgent, Network: pool,
					Fed: c.feedFed(k, now), Archive: catalog.Archives(e.Attrs), Archived: c.forgeFlags[k].archived}
				if as.seed && seedBase != "" {
					r.SeedUrl = seedBase + "/" + k.String() + ".git"
				}
				a.Repos = append(a.Repos, r)
			}
		}
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_Assign{Assign: a}})
	}
	if len(s.states) > 0 || s.sweepAt < len(s.sweep) {
		// Changed states first, but no more than half a batch while a
		// sweep is under way: a steady churn must not hold a new full
		// node's view incomplete.
		m := n
		if s.sweepAt < len(s.sweep) {
			m = max(n/2, 1)
		}
		keys := take(s.states, m)
		if len(keys) < n && s.sweepAt < len(s.sweep) {
			end := min(len(s.sweep), s.sweepAt+n-len(keys))
			keys = append(keys, s.sweep[s.sweepAt:end]...)
			s.sweepAt = end
			if s.sweepAt == len(s.sweep) {
				s.sweep, s.sweepAt = nil, 0
			}
		}
		rs := &fleetv1.RepoStates{}
		for _, k := range keys {
			e, ok := c.entry(k)
			if !ok {
				continue
			}
			r := c.status[k]
			if r == nil {
				r = &repoStatus{}
			}
			owner, _ := c.owner(k)
			net, _, parts := c.engine.Network(k)
			state, since := c.stateSince(k, r)
			var renamedTo string
			if state == repostate.Renamed {
				renamedTo = c.renames[k].to
			}
			rs.Repos = append(rs.Repos, &fleetv1.RepoState{Key: k.String(), Url: e.URL, Owner: owner, Digest: r.Digest(),
				State: state.String(), StateSinceMs: since, LastCheckMs: r.lastCheck, LastChangeMs: r.lastChange, LastError: r.errorText(k),
				Class: uint32(r.class), Attrs: e.Attrs, FallbackUrls: e.Fallbacks, Checks: uint64(r.checks), Fetches: uint64(r.fetches),
				LastDurationMs: r.lastDuration.ms(), Network: net, NetworkParts: uint32(parts), Replicas: c.replicas(k),
				ReplicaStates: c.replicaStates(k), Head: r.head, RenamedTo: renamedTo})
		}
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_RepoStates{RepoStates: rs}})
	}
	// A tier drop goes after the key's state, which no longer names the
	// node: the full node keeps a copy its state still names. A sweep
	// under way (a new session's) sends every state: the drops wait for
	// its end.
	var drops []repokey.Key
	for k := range s.tierDrop {
		if s.sweepAt < len(s.sweep) {
			break
		}
		if len(drops) >= n {
			break
		}
		if !s.states[k] {
			drops = append(drops, k)
		}
	}
	if len(drops) > 0 {
		for _, k := range drops {
			delete(s.tierDrop, k)
		}
		out = append(out, &fleetv1.CoordinatorMessage{Msg: &fleetv1.CoordinatorMessage_TierDrop{TierDrop: &fleetv1.TierDrop{Keys: keyStrings(drops)}}})
	}
	return out
}

// checksToSend empties the check queue into its messages: one CheckNow a
// key, with its push and its first task; a further task of the key rides
// on a CheckNow of its own, which the node adds to the same check. The
// cancellations come last: a task asked again after its cancellation is
// a new task, with an ID of its own. Caller holds c.mu.
func (s *session) checksToSend() []*fleetv1.CheckNow {
	var out []*fleetv1.CheckNow
	for _, key := range s.checkOrder {
		q := s.checks[key]
		delete(s.checks, key)
		ch := &fleetv1.CheckNow{Key: key.String(), PushedAtUnix: q.pushed}
		if len(q.tasks) > 0 {
			ch.TaskId = q.tasks[0]
		}
		out = append(out, ch)
		for _, t := range q.tasks[min(1, len(q.tasks)):] {
			out = append(out, &fleetv1.CheckNow{Key: key.String(), TaskId: t})
		}
	}
	s.checkOrder = s.checkOrder[:0]
	out = append(out, s.cancels...)
	s.cancels = nil
	return out
}

// take removes and returns up to n keys of m.
func take(m map[repokey.Key]bool, n int) []repokey.Key {
	keys := make([]repokey.Key, 0, min(n, len(m)))
	for k := range m {
		if len(keys) >= n {
			break
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		delete(m, k)
	}
	return keys
}

// keyStrings writes keys as a message carries them.
func keyStrings(keys []repokey.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}

func (s *session) sendLoop(ctx context.Context, stream fleetv1.Coordinator_SessionServer) error {
	for {
		s.c.mu.Lock()
		msgs := s.next()
		s.c.mu.Unlock()
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				return err
			}
		}
		if len(msgs) > 0 {
			continue
		}
		// Everything that queues a message kicks the session (a buffered
		// signal, never lost), so an idle session waits for it alone.
		select {
		case <-ctx.Done():
			return nil
		case <-s.signal:
		}
	}
}
