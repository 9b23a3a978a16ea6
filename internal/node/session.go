package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/tunnel"
	"github.com/gitfleet/gitfleet/internal/version"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// ErrJoinRefused is returned when the coordinator refuses to admit the
// node: a wrong join or full token, or a revoked node.
var ErrJoinRefused = errors.New("the coordinator refused to admit this node")

type coordSession struct {
	stream fleetv1.Coordinator_SessionClient
}

// coordinatorLoop connects to the coordinator, registers, and keeps a
// session open, reconnecting with backoff, until ctx ends. With several
// coordinators it goes where a follower says the leader is, and otherwise
// tries the next address.
func (n *Node) coordinatorLoop(ctx context.Context) error {
	creds := insecure.NewCredentials()
	if n.cfg.TLS != nil {
		creds = credentials.NewTLS(n.cfg.TLS)
	}
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(addr string) (fleetv1.CoordinatorClient, error) {
		if c := conns[addr]; c != nil {
			return fleetv1.NewCoordinatorClient(c), nil
		}
		c, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(creds),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return nil, fmt.Errorf("node: coordinator address %q: %w", addr, err)
		}
		conns[addr] = c
		return fleetv1.NewCoordinatorClient(c), nil
	}
	addrs := n.cfg.Coordinators
	next, hint := 0, ""
	inClear := tlsHint{} // without TLS: whether the coordinators speak it
	redirects, electing := 0, false
	// Every address tried in vain: wait, from 500 ms to 30 s, jittered so
	// that a fleet that lost its coordinator does not come back at once.
	bo := backoff.New(n.clk, 500*time.Millisecond, 30*time.Second).Jittered(nil)
	for ctx.Err() == nil {
		addr := addrs[next%len(addrs)]
		if hint != "" {
			addr, hint = hint, ""
		}
		client, err := dial(addr)
		if err != nil {
			return err
		}
		n.mu.Lock()
		n.client = client
		n.mu.Unlock()
		err = n.register(ctx, client)
		if err == nil {
			bo.Reset()
			redirects = 0
			err = n.session(ctx, client, addr)
		}
		if errors.Is(err, ErrJoinRefused) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		// A follower names the leader: go there at once, unless the
		// followers keep sending the node round in circles (an election
		// under way).
		leader, notLeader := fleetv1.LeaderHint(err)
		if notLeader { // an address out of reach says nothing of the leader
			n.leaderless.Store(leader == "")
		}
		if notLeader && leader != "" && leader != addr && redirects < len(addrs)+1 {
			redirects++
			n.log.Info("coordinator is not the leader; going to the leader", "coordinator", addr, "leader", leader)
			hint = leader
			continue
		}
		// A follower that knows no leader: one is being elected, and
		// will be there within the lease.
		electing = electing || notLeader
		next++
		wait := 100 * time.Millisecond // the next address, soon
		if next%len(addrs) == 0 {      // every address tried: back off
			wait = bo.Failed()
			if electing {
				wait = min(wait, time.Second)
			}
			redirects, electing = 0, false
		}
		n.log.Warn("coordinator unreachable or session lost; retrying", "coordinator", addr, "err", err, "retry_in", wait.Round(time.Millisecond))
		if n.cfg.TLS == nil {
			inClear.observe(ctx, n.log, addr, err)
		}
		if bo.Wait(ctx, wait) != nil {
			return nil
		}
	}
	return nil
}

func (n *Node) register(ctx context.Context, client fleetv1.CoordinatorClient) error {
	reg := n.reg
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := client.Register(rctx, &fleetv1.RegisterRequest{JoinToken: n.cfg.JoinToken, FullToken: reg.FullToken, NodeId: n.id,
		NodeSecret: n.secret, Name: n.cfg.Name, Mode: reg.Mode, Capacity: n.cfg.Capacity,
		TunnelAddr: reg.TunnelAddr, Version: version.Version, PublicUrl: reg.PublicURL,
		MaxBandwidth: uint64(n.cfg.MaxBandwidth), ActiveHours: n.cfg.ActiveHours.String()})
	if err != nil {
		if status.Code(err) == codes.PermissionDenied {
			n.refusedBy(err, status.Convert(err).Message())
			return fmt.Errorf("%w: %s", ErrJoinRefused, status.Convert(err).Message())
		}
		return fmt.Errorf("register: %w", err)
	}
	n.heartbeatMs.Store(resp.GetHeartbeatIntervalMs())
	if resp.GetNodeSecret() != "" || resp.GetNodeId() != n.id {
		n.mu.Lock()
		n.id, n.secret = resp.GetNodeId(), resp.GetNodeSecret()
		n.mu.Unlock()
		n.stopTunnels() // opened under the former identity: the next Welcome reopens them
		if err := n.saveIdentity(); err != nil {
			return err
		}
		n.log.Info("registered with the coordinator", "node", n.id)
	}
	return nil
}

// session runs one session with the coordinator at addr (client): hello,
// inventory, then heartbeats and results out and assignments in.
func (n *Node) session(ctx context.Context, client fleetv1.CoordinatorClient, addr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Session(ctx)
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	if err := stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Hello{Hello: &fleetv1.Hello{NodeId: n.id, NodeSecret: n.secret}}}); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if err := n.sendInventory(stream); err != nil {
		return err
	}
	s := &coordSession{stream: stream}
	n.mu.Lock()
	n.sess = s
	n.mu.Unlock()
	n.leaderless.Store(false)
	defer func() {
		n.mu.Lock()
		if n.sess == s {
			n.sess = nil
		}
		n.mu.Unlock()
	}()
	n.log.Info("session open", "node", n.id, "coordinator", addr)
	sendErr := make(chan error, 1)
	go func() { sendErr <- n.sendLoop(ctx, stream) }()
	for {
		msg, err := stream.Recv()
		if err != nil {
			cancel()
			<-sendErr
			if status.Code(err) == codes.Unauthenticated {
				n.id, n.secret = 0, "" // forgotten by the coordinator: register anew
			}
			return fmt.Errorf("session: %w", err)
		}
		n.handle(ctx, msg)
	}
}

func (n *Node) sendInventory(stream fleetv1.Coordinator_SessionClient) error {
	n.mu.Lock()
	inv := make([]*fleetv1.HeldRepo, 0, len(n.digests))
	for k, d := range n.digests {
		inv = append(inv, &fleetv1.HeldRepo{Key: k.String(), Digest: d})
	}
	n.mu.Unlock()
	for len(inv) > 0 {
		batch := inv[:min(len(inv), 1000)]
		inv = inv[len(batch):]
		if err := stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Inventory{Inventory: &fleetv1.Inventory{Repos: batch, Done: len(inv) == 0}}}); err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
	}
	return nil
}

// sendLoop sends heartbeats and batched results.
func (n *Node) sendLoop(ctx context.Context, stream fleetv1.Coordinator_SessionClient) error {
	interval := time.Duration(n.heartbeatMs.Load()) * time.Millisecond
	if interval <= 0 {
		interval = config.DefaultHeartbeat
	}
	hb := n.clk.NewTicker(interval)
	defer hb.Stop()
	flush := n.clk.NewTicker(200 * time.Millisecond)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hb.C():
			if err := stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Heartbeat{Heartbeat: n.heartbeat()}}); err != nil {
				return err
			}
		case <-flush.C():
		case <-n.sendNow:
		}
		n.mu.Lock()
		handBack := n.handBack
		n.handBack = nil
		n.mu.Unlock()
		if len(handBack) > 0 {
			if err := stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_HandBack{HandBack: &fleetv1.HandBack{Keys: handBack}}}); err != nil {
				n.mu.Lock()
				n.handBack = append(n.handBack, handBack...)
				n.mu.Unlock()
				return err
			}
		}
		n.mu.Lock()
		var batch []*fleetv1.CheckResult
		for k, r := range n.results {
			batch = append(batch, r)
			delete(n.results, k)
			if len(batch) == 500 {
				break
			}
		}
		n.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if err := stream.Send(&fleetv1.NodeMessage{Msg: &fleetv1.NodeMessage_Results{Results: &fleetv1.Results{Results: batch}}}); err != nil {
			// Keep them for the next session: nothing is lost.
			n.mu.Lock()
			for _, r := range batch {
				if newer, ok := n.results[r.Key]; ok {
					n.results[r.Key] = withTasksOf(newer, r)
				} else {
					n.results[r.Key] = r
				}
			}
			n.mu.Unlock()
			return err
		}
	}
}

func (n *Node) heartbeat() *fleetv1.Heartbeat {
	hb := &fleetv1.Heartbeat{}
	hb.DiskUsedBytes, hb.DiskTotalBytes = n.Disk()
	n.mu.Lock()
	hb.Repos = uint32(len(n.owned))
	n.mu.Unlock()
	stats := n.sched.Stats()
	hb.Queued, hb.Running = uint32(stats.Urgent+stats.Background), uint32(stats.Running)
	if !stats.Healthy && hb.DiskTotalBytes > 0 && float64(hb.DiskUsedBytes) < 0.9*float64(hb.DiskTotalBytes) {
		// A disk error stopped background checks; there is room again.
		n.log.Info("disk has room again: resuming background checks")
		n.sched.ResetHealth()
		stats.Healthy = true
	}
	hb.Unhealthy = !stats.Healthy
	hb.Resting = n.resting()
	return hb
}

// Report queues a result for the coordinator (the newest per key wins).
func (n *Node) Report(r *fleetv1.CheckResult) {
	n.mu.Lock()
	n.results[r.Key] = withTasksOf(r, n.results[r.Key])
	n.mu.Unlock()
	n.sendSoon()
}

// sendSoon wakes the session's sender.
func (n *Node) sendSoon() {
	select {
	case n.sendNow <- struct{}{}:
	default:
	}
}

// handle applies one message from the coordinator.
func (n *Node) handle(ctx context.Context, msg *fleetv1.CoordinatorMessage) {
	switch m := msg.Msg.(type) {
	case *fleetv1.CoordinatorMessage_Welcome:
		n.setTunnels(n.runCtx, n.peerTunnels(m.Welcome.GetTunnelAddrs()))
	case *fleetv1.CoordinatorMessage_Assign:
		if f := m.Assign.GetFleetRepos(); f > 0 {
			n.fleetRepos.Store(f)
		}
		for _, r := range m.Assign.GetRepos() {
			n.assign(r)
		}
		n.checkBudget()
		n.kick()
	case *fleetv1.CoordinatorMessage_Drop:
		for _, k := range m.Drop.GetKeys() {
			n.drop(ctx, k)
		}
	case *fleetv1.CoordinatorMessage_CheckNow:
		if m.CheckNow.GetCancel() {
			n.cancelCheck(m.CheckNow.GetKey(), m.CheckNow.GetTaskId())
		} else {
			if at := m.CheckNow.GetPushedAtUnix(); at > 0 {
				// A forge's feed saw this push: the scheduler learns the
				// repository's rate from it.
				n.observePush(m.CheckNow.GetKey(), time.Unix(at, 0))
			}
			n.checkNow(m.CheckNow.GetKey(), m.CheckNow.GetTaskId())
		}
	case *fleetv1.CoordinatorMessage_FeedStatus:
		n.setFeeds(m.FeedStatus.GetWorking())
		n.role.Handle(ctx, msg) // a full node's spot checks and alerts
	case *fleetv1.CoordinatorMessage_Standing:
		n.setStanding(m.Standing)
	default:
		// The fleet's states and removals, tasks done, node credentials
		// and change hints: a full node's.
		n.role.Handle(ctx, msg)
	}
}

func (n *Node) assign(r *fleetv1.Repo) {
	key := r.GetKey()
	// The coordinator validated the URL; a node checks again, so that a
	// confused or compromised coordinator cannot make it fetch elsewhere.
	want, _, err := repokey.Normalize(r.GetUrl(), repokey.Options{AllowPrivate: n.cfg.AllowPrivate, Egress: n.cfg.Egress, Fold: n.cfg.Fold})
	if err != nil || !repokey.SameRepository(want.String(), key) {
		n.refuseAssignment(key, r.GetUrl(), want.String(), err)
		return
	}
	// The key as the mirror store takes it, parsed once here, at the edge.
	k, err := repokey.Parse(key)
	if err != nil {
		n.refuseAssignment(key, r.GetUrl(), want.String(), err)
		return
	}
	n.role.Assigned(k) // before a check could clone it anew
	n.mu.Lock()
	o, known := n.owned[key]
	if !known {
		o = &owned{}
		n.owned[key] = o
	}
	o.key, o.url, o.fallbacks, o.network, o.archive = k, r.GetUrl(), r.GetFallbackUrls(), r.GetNetwork(), r.GetArchive()
	if r.GetSeedUrl() != "" && !n.reg.HoldsAll {
		o.seedURL = r.GetSeedUrl()
	}
	asked := n.takeEarly(key, o)
	n.mu.Unlock()
	if !known {
		n.addToSchedule(k, k.Host())
	}
	// Fed only while the coordinator's feed answers for it (an Assign
	// again says when that changes), and its host's feed works (setFeeds).
	n.sched.SetAnswered(k, r.GetFed())
	n.sched.SetArchived(k, r.GetArchived())
	if r.GetUrgent() && known || asked {
		n.sched.Urgent(k)
	}
}

// checkBudget warns, once each time it becomes true, when the background
// budget cannot check every repository within --max-interval: the budget
// wins, and the most overdue repositories are checked first.
func (n *Node) checkBudget() {
	if n.cfg.Budget <= 0 || n.cfg.MaxInterval <= 0 {
		return
	}
	n.mu.Lock()
	repos := len(n.owned)
	n.mu.Unlock()
	need := float64(repos) / n.cfg.MaxInterval.Hours()
	short := need > n.cfg.Budget
	if short != n.budgetShort.Swap(short) && short {
		n.log.Warn("the check budget cannot cover --max-interval for every repository",
			"repos", repos, "max_interval", n.cfg.MaxInterval, "budget_per_hour", n.cfg.Budget,
			"needed_per_hour", fmt.Sprintf("%.1f", need))
	}
}

// drop stops fetching key and, unless the node holds every repository (a
// full node serves them all), deletes its mirror.
func (n *Node) drop(ctx context.Context, key string) {
	n.mu.Lock()
	o, known := n.owned[key]
	delete(n.owned, key)
	delete(n.early, key)
	n.mu.Unlock()
	if known {
		n.sched.Remove(o.key) // the key parsed when it was assigned
	}
	// The one check of a dropped key, where the coordinator's message
	// arrives: a key that is not one names no mirror here.
	k, err := repokey.Parse(key)
	if err != nil {
		n.log.Error("coordinator dropped an invalid key", "key", key, "err", err)
		return
	}
	n.mu.Lock()
	n.metaDirty[k] = true // forgotten at the next save unless still held
	n.mu.Unlock()
	if n.reg.HoldsAll {
		return // the full node keeps its copy: it serves every repository
	}
	if err := n.mirror.Remove(ctx, k); err != nil {
		n.log.Error("drop mirror", "key", key, "err", err)
		return
	}
	n.ForgetDigest(k)
	n.log.Info("dropped", "key", key)
}

// observePush tells the scheduler of a push a forge's feed saw to key, if
// the node owns it: its Key is the one parsed when it was assigned (the
// scheduler holds no other).
func (n *Node) observePush(key string, pushedAt time.Time) {
	n.mu.Lock()
	o := n.owned[key]
	n.mu.Unlock()
	if o != nil {
		n.sched.ObservePush(o.key, pushedAt)
	}
}

func (n *Node) checkNow(key, taskID string) {
	n.mu.Lock()
	o := n.owned[key]
	if o != nil && taskID != "" {
		o.taskIDs = append(o.taskIDs, taskID)
	}
	if o == nil {
		n.askedEarly(key, taskID)
	}
	n.mu.Unlock()
	n.log.Debug("check asked", "key", key, "task", taskID, "assigned", o != nil)
	if o != nil {
		// An urgent check asks HEAD too: a feed may have seen the default
		// branch switch, which moves no ref.
		n.mirror.ExpireHead(o.key)
		n.sched.Urgent(o.key)
		n.kick()
	}
}

func (n *Node) kick() {
	select {
	case n.wakeup <- struct{}{}:
	default:
	}
}

func (n *Node) setTunnels(ctx context.Context, addrs []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
		if _, ok := n.tunnels[a]; ok {
			continue
		}
		tctx, cancel := context.WithCancel(ctx)
		n.tunnels[a] = cancel
		cfg := tunnel.ClientConfig{Addr: a, NodeID: n.id, Proof: tunnelProof(n.secret, n.id), Logger: n.log, TLS: n.cfg.TLS,
			MinBackoff: 500 * time.Millisecond, MaxBackoff: 15 * time.Second, Upload: n.bw, Clock: n.clk}
		n.tunnelWG.Go(func() { // waited for by Run, after stopTunnels
			if err := tunnel.Serve(tctx, cfg, n.tunnelHandler()); err != nil && tctx.Err() == nil {
				n.log.Error("tunnel stopped", "addr", a, "err", err)
			}
		})
		n.log.Info("opening tunnel to full node", "addr", a)
	}
	for a, cancel := range n.tunnels {
		if !want[a] {
			cancel()
			delete(n.tunnels, a)
		}
	}
}

// peerTunnels is where this node opens tunnels: every full node's tunnel
// but its own. A full node that holds repositories of its own (capacity
// above 0) is an owner like any other, so the other full nodes pull them
// through a tunnel it opens to each of them.
func (n *Node) peerTunnels(addrs []string) []string {
	own := n.reg.TunnelAddr
	if own == "" {
		return addrs
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if a != own {
			out = append(out, a)
		}
	}
	return out
}

func (n *Node) stopTunnels() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, cancel := range n.tunnels {
		cancel()
		delete(n.tunnels, a)
	}
}
