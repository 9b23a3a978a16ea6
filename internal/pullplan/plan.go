// Package pullplan is the full node's plan of pulls and upstream checks:
// which repository to pull from its owner next and when, how long a failed
// pull waits (package backoff's rule), which pulls wait for disk room or
// for the owner's next digest (over a limit), where a pull comes from (the
// owner, or a peer full node: source.go) and the peer copies' turns, and
// the full node's own word on freshness: the book of change hints (which
// upstream to ask now, which owner's report to count as stale) and the
// choice of spot checks.
//
// It is a pure state machine in the shape of package placement: the full
// node (package fullnode, the shell) feeds it events (an owner's state
// seen, a pull started and ended with its Outcome, the disk full or free,
// a key removed, a hint, a tick) and runs the decisions that come out
// (Next: pull this key; Tick: ask the upstream about these keys, count
// these stale reports; NextWake: when something falls due). It must not
// do I/O, start goroutines or read the clock (every time is passed in;
// the backoff's jitter source is injected), and it does not know the
// repositories' states beyond what the events say (package repoview
// does). Its keys are repokey.Keys, parsed where the full node received
// them: the plan trusts them and checks none. A Plan is not safe for
// concurrent use: the shell holds its lock.
//
// The pulls waiting are a heap ordered by due time (then by arrival): a
// pick, a removal and a re-queue are O(log n) whatever the number of
// pending keys.
package pullplan

import (
	"cmp"
	"math"
	"time"

	"github.com/gitfleet/gitfleet/internal/backoff"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// DefaultMaxHints bounds the change hints kept open; past it a hint is
// dropped (RefusedFull), and the spot checks remain.
const DefaultMaxHints = 100_000

// Outcome is how a pull ended.
type Outcome uint8

const (
	// Pulled: the pull worked (or the key had left, or is owned here).
	Pulled Outcome = iota + 1
	// Failed: tried again after the backoff (or at once on a new state).
	Failed
	// OverLimit: the owner served more than --max-repo-size or
	// --max-refs allow; its digest is not pulled again on a timer, only
	// when the owner reports another.
	OverLimit
	// Stopped: the pull was cut short (the node stops); nothing learned.
	Stopped
)

// Config holds the plan's rules. Zero values take the defaults.
type Config struct {
	HintWait   time.Duration // how long an owner has to report a change heard of (--hint-wait)
	MaxHints   int           // 0: DefaultMaxHints
	RetryBase  time.Duration // the first wait after a failed pull; 0: 2 s
	RetryLimit time.Duration // the longest; 0: 30 s
	// RepairAfter is how long a copy may differ from the verified digest
	// before a peer repairs it (source.go); 0: DefaultRepairAfter.
	RepairAfter time.Duration
	Jitter      backoff.Source // nil: math/rand/v2's shared source
}

// diskRetry is how long a pull refused while clones under way hold the
// room (their size is not known yet) waits before it is tried again.
const diskRetry = time.Second

// State is an owner's state of one repository, as the coordinator sent it,
// with what the full node serves.
type State struct {
	Key    repokey.Key
	Owner  uint32 // the owning node (0: none)
	Own    bool   // this node owns it (fetches it itself)
	Digest string // the owner's digest ("": nothing fetched yet)
	Served string // the digest the full node serves ("": none)
	// Checked is the time of the owner's check (its clock) when this state
	// tells of a new one without an error; zero otherwise.
	Checked time.Time
	// NetworkChanged: the repository's fork network was set or changed
	// since the last state: a pull puts the mirror in its network's pool.
	NetworkChanged bool
	// Elsewhere: the full tier places the repository on other full nodes
	// (its replicas do not include this one). It is not pulled here, and a
	// pull queued for it is let go; a copy held already stays (the relay
	// serves from a replica all the same).
	Elsewhere bool
}

// StaleReport is a stale report to count against Node, about Key.
type StaleReport struct {
	Key  repokey.Key
	Node uint32
}

// Ready is what falls due at a Tick.
type Ready struct {
	Check []repokey.Key // ask these keys' upstreams now (why: "hint")
	Stale []StaleReport // count these stale reports
}

// Plan is the full node's plan of pulls and checks.
type Plan struct {
	cfg     Config
	keys    map[repokey.Key]*entry // every key with a pull queued, running, waiting, failed or over a limit
	queue   queue                  // the keys pending and not being pulled, by due time
	seq     uint64                 // arrivals, for the queue's ties
	pending int                    // keys pending (queued or to pull again after their pull)
	pulling map[repokey.Key]bool
	waiting map[repokey.Key]*entry // keys waiting for disk room
	// overLimit holds the owner's digest whose pull went over a limit,
	// by key: few keys, so not a field of every entry.
	overLimit map[repokey.Key]string
	full      bool // the disk is above its high water
	hints     hintBook
	stale     []StaleReport // for the next Tick
	// diverged holds the copies that differ from the verified digest
	// (source.go): few keys, so not a field of every entry.
	diverged map[repokey.Key]*divergence
	moves    []repokey.Key // keys waiting for a peer copy's slot, oldest first
}

// entry is one key's pull bookkeeping, kept small (32 bytes): a million
// keys may wait at once. Its due time is in its queue slot. An entry with
// nothing to tell is dropped (tidy).
type entry struct {
	key      repokey.Key
	at       int32  // its index in the queue; -1: not in it
	fails    uint32 // failed pulls in a row: its backoff
	pending  bool   // to pull (queued, or again at once after the pull under way)
	pulling  bool
	diskWait bool // refused for disk: waits for room, without retry
	moveWait bool // to copy from a peer: waits for a slot (source.go)
	gone     bool // removed or placed elsewhere while pulling: dropped when the pull ends
}

// New returns an empty plan.
func New(cfg Config) *Plan {
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 2*time.Second)
	cfg.RetryLimit = max(cmp.Or(cfg.RetryLimit, 30*time.Second), cfg.RetryBase)
	cfg.RepairAfter = cmp.Or(cfg.RepairAfter, DefaultRepairAfter)
	return &Plan{cfg: cfg, keys: map[repokey.Key]*entry{}, pulling: map[repokey.Key]bool{}, waiting: map[repokey.Key]*entry{},
		overLimit: map[repokey.Key]string{}, hints: newHintBook(cfg.HintWait, cfg.MaxHints), diverged: map[repokey.Key]*divergence{}}
}

func (p *Plan) get(key repokey.Key) *entry {
	e := p.keys[key]
	if e == nil {
		e = &entry{key: key, at: -1}
		p.keys[key] = e
	}
	return e
}

// tidy drops e when it has nothing left to tell.
func (p *Plan) tidy(e *entry) {
	if !e.pending && !e.pulling && !e.diskWait && !e.moveWait && e.fails == 0 {
		delete(p.keys, e.key)
	}
}

// want makes e pending, due at due (zero: at once). One pulling is queued
// at once when its pull ends, unless the pull's end decides otherwise.
func (p *Plan) want(e *entry, due time.Time) {
	if !e.pending {
		e.pending = true
		p.pending++
	}
	switch {
	case e.pulling:
	case e.at < 0:
		p.seq++
		p.queue.push(e, dueKey(due), p.seq)
	default:
		p.queue.fix(int(e.at), dueKey(due))
	}
}

// unwant makes e not pending.
func (p *Plan) unwant(e *entry) {
	if e.pending {
		e.pending = false
		p.pending--
	}
	if e.at >= 0 {
		p.queue.remove(int(e.at))
	}
}

// Seen follows an owner's state s at now. A check it tells of weighs on
// the change hints: an owner that says "unchanged" after a push makes the
// full node ask the upstream (CheckNow), or is counted stale (CountStale:
// queued for the next Tick). A digest of the owner's that differs from
// the one served is pulled, unless it was found behind the upstream, it
// claims "unchanged" after a push heard of (the upstream is asked
// instead), the key waits for disk room, the digest went over a limit, or
// the repository is placed elsewhere (then a pull queued is let go).
func (p *Plan) Seen(s State, now time.Time) Action {
	var act Action
	if !s.Checked.IsZero() {
		act = p.hints.reported(s.Key, s.Owner, s.Checked, s.Digest, now)
		if act == CountStale {
			p.stale = append(p.stale, StaleReport{s.Key, s.Owner})
		}
	}
	p.diverge(s, now)
	e := p.keys[s.Key]
	if s.Elsewhere {
		if e != nil {
			p.letGo(e)
		}
		return act
	}
	if e != nil && e.gone {
		e.gone = false // back in the catalog while its old pull ran
	}
	if s.Owner == 0 || s.Own || s.Digest == "" || e != nil && e.diskWait {
		return act
	}
	if s.NetworkChanged || s.Digest != s.Served && s.Digest != p.hints.stale(s.Key) && !p.hints.claims(s.Key, s.Digest) &&
		p.overLimit[s.Key] != s.Digest {
		p.want(p.get(s.Key), time.Time{})
	}
	return act
}

// Queue makes key pulled at once (its mirror was repaired, or it came back
// from retirement): the owner's copy may differ.
func (p *Plan) Queue(key repokey.Key) { p.want(p.get(key), time.Time{}) }

// Next picks the key to pull at now, the one due first (then the first to
// arrive), and marks it pulling; false when none is due.
func (p *Plan) Next(now time.Time) (repokey.Key, bool) {
	if len(p.queue) == 0 || dueKey(now) < p.queue[0].due {
		return "", false
	}
	e := p.queue.top()
	p.unwant(e)
	e.pulling, e.moveWait = true, false
	p.pulling[e.key] = true
	return e.key, true
}

// Refused follows the refusal of a pull Next picked, for disk room: while
// the disk is full the key waits (Disk releases it), else clones under
// way hold the room and it is tried again shortly. It reports whether the
// key waits for room.
func (p *Plan) Refused(key repokey.Key, now time.Time) bool {
	e := p.stop(key)
	if e == nil {
		return false
	}
	if p.full {
		p.waitDisk(e)
	} else {
		p.want(e, now.Add(diskRetry))
	}
	if e.pending && e.at < 0 {
		p.want(e, time.Time{})
	}
	return e.diskWait
}

// stop ends key's pull in the bookkeeping; nil when it was not pulling or
// has left meanwhile (then it is dropped).
func (p *Plan) stop(key repokey.Key) *entry {
	e := p.keys[key]
	if e == nil || !e.pulling {
		return nil
	}
	e.pulling = false
	delete(p.pulling, key)
	if e.gone {
		delete(p.keys, key)
		return nil
	}
	return e
}

// NoteOverLimit records that a pull of key (Next's, or an on-demand one
// the plan did not pick) found the owner's digest over a limit: whatever
// the rest of the pull gives (the upstream fetched instead), that digest
// is not pulled again.
func (p *Plan) NoteOverLimit(key repokey.Key, digest string) {
	if e := p.keys[key]; e == nil || !e.gone {
		p.setOverLimit(key, digest)
	}
}

func (p *Plan) setOverLimit(key repokey.Key, digest string) {
	if digest == "" {
		delete(p.overLimit, key)
	} else {
		p.overLimit[key] = digest
	}
}

// Ended follows the end at now of key's pull of the owner's digest. A
// failure is tried again after the backoff (from RetryBase, doubling to
// RetryLimit, jittered); a pull over a limit (or one that failed after
// NoteOverLimit) waits for the owner's next digest, never a timer; a
// success forgets the failures. A state seen while the pull ran pulls
// again after it. A key removed while it was pulled is dropped.
func (p *Plan) Ended(key repokey.Key, digest string, o Outcome, now time.Time) {
	e := p.stop(key)
	if e == nil {
		return
	}
	tooBig := digest != "" && p.overLimit[key] == digest
	switch {
	case o == Stopped:
	case o == OverLimit || o == Failed && tooBig:
		e.fails = 0
		p.setOverLimit(key, digest)
	case o == Failed:
		e.fails++
		wait := backoff.Jitter(backoff.Delay(int(e.fails), p.cfg.RetryBase, p.cfg.RetryLimit), p.cfg.Jitter)
		p.want(e, now.Add(wait))
	default:
		e.fails = 0
		if !tooBig { // fetched from the upstream instead: the owner's digest stays refused
			delete(p.overLimit, key)
		}
	}
	if o != Stopped {
		p.repairDue(e)
	}
	if e.pending && e.at < 0 {
		p.want(e, time.Time{})
	}
	p.tidy(e)
}

// Disk follows a measure of the disk: full is whether it is above its
// high water. Below it, the keys that waited for room are released (the
// caller queues those it pulls, and reschedules the ones it owns).
func (p *Plan) Disk(full bool) []repokey.Key {
	p.full = full
	if full || len(p.waiting) == 0 {
		return nil
	}
	released := make([]repokey.Key, 0, len(p.waiting))
	for k, e := range p.waiting {
		released = append(released, k)
		e.diskWait = false
		p.tidy(e)
	}
	clear(p.waiting)
	return released
}

// WaitDisk makes key wait for disk room (an own fetch the disk refused):
// the next Disk below the mark releases it.
func (p *Plan) WaitDisk(key repokey.Key) { p.waitDisk(p.get(key)) }

func (p *Plan) waitDisk(e *entry) {
	e.diskWait = true
	p.waiting[e.key] = e
}

// DiskWaiting tells whether key waits for disk room.
func (p *Plan) DiskWaiting(key repokey.Key) bool { return p.waiting[key] != nil }

// Removed forgets key (it left the catalog): its queued pull, its waits,
// its failures and its hint. A pull under way ends unheeded.
func (p *Plan) Removed(key repokey.Key) {
	p.hints.forget(key)
	delete(p.overLimit, key)
	delete(p.diverged, key)
	if e := p.keys[key]; e != nil {
		p.letGo(e)
	}
}

// letGo forgets e's pull, its waits and its failures; a pull under way
// ends unheeded.
func (p *Plan) letGo(e *entry) {
	p.unwant(e)
	delete(p.waiting, e.key)
	if e.pulling {
		*e = entry{key: e.key, at: -1, pulling: true, gone: true}
		return
	}
	delete(p.keys, e.key)
}

// OwnSynced follows this node's own fetch of key (it owns it) from the
// upstream, by a check that started at start: no pull is needed, and a
// hint of a change before start is settled.
func (p *Plan) OwnSynced(key repokey.Key, start time.Time) {
	if e := p.keys[key]; e != nil {
		p.unwant(e)
		p.tidy(e)
	}
	p.hints.verified(key, start)
}

// Pending is how many keys wait for a pull (one under way may be among
// them, to pull again after it).
func (p *Plan) Pending() int { return p.pending }

// IsPending tells whether key waits for a pull.
func (p *Plan) IsPending(key repokey.Key) bool {
	e := p.keys[key]
	return e != nil && e.pending
}

// Pulling returns the keys being pulled, in no order.
func (p *Plan) Pulling() []repokey.Key {
	keys := make([]repokey.Key, 0, len(p.pulling))
	for k := range p.pulling {
		keys = append(keys, k)
	}
	return keys
}

// DiskWaitCount is how many keys wait for disk room.
func (p *Plan) DiskWaitCount() int { return len(p.waiting) }

// Tick returns what is due at now: the hints whose upstream must be asked
// (each once: a later event makes it due again), and the stale reports to
// count; it drops the hints that expired.
func (p *Plan) Tick(now time.Time) Ready {
	keys, _ := p.hints.due(now)
	r := Ready{Check: keys, Stale: p.stale}
	p.stale = nil
	return r
}

// Wake is when each kind of decision falls due next (zero: none is
// scheduled; an event will tell).
type Wake struct {
	Pull  time.Time // Next has a key to pull
	Check time.Time // Tick has a hint whose upstream to ask (no later than)
}

// NextWake is when the queued pulls and the open hints fall due next, as
// far as the plan knows at now; a due time not after now is now.
func (p *Plan) NextWake(now time.Time) Wake {
	var w Wake
	if len(p.queue) > 0 {
		w.Pull = now
		if d := p.queue[0].due; d != math.MinInt64 {
			w.Pull = later(time.Unix(0, d), now)
		}
	}
	if !p.hints.next.IsZero() {
		w.Check = later(p.hints.next, now)
	}
	return w
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
