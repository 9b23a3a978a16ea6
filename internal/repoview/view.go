// Package repoview is the full node's compact view of every repository
// of the fleet, as the coordinator sends their states: the view itself
// (View: a million repositories in about 200 bytes each), the class of
// each (its state as the API shows it, its owner, whether it is current)
// with the counters and ordered indexes kept as classes change (Counters),
// the ordered keys for listings (SortedIndex), the members of each fork
// network (kept by the View) and the count of stale repositories for the
// alerts (StaleCounter).
//
// Only the full node (package fullnode) keeps one. It is pure: no I/O, no
// goroutines, no clock (times are passed in). It decides nothing: what a
// class is, and whether a repository is current, the full node says; this
// package keeps the figures that follow, so that a listing costs a binary
// search and its page and /metrics O(states), never a walk of the
// repositories. Its keys are repokey.Keys, which the full node parsed
// where a state arrived: the view trusts them and checks none. Its types
// are not safe for concurrent use: the full node guards them with its lock.
package repoview

import (
	"encoding/hex"
	"iter"
	"maps"
	"math"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/intern"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repostate"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A full node keeps the coordinator's state of every repository of the
// fleet: a million of them on a large mirror. A fleetv1.RepoState in a
// map costs about 530 bytes with its strings (the message, its key, URL,
// state and digest strings, and an error text that names the repository),
// the view about 185 with its key and map entry
// (TestViewIsAFractionOfTheMessages); an Entry keeps the same facts, and
// the full node's own verified_at (4 bytes), in 80 bytes:
//   - the URL only when it is not https://KEY (the usual spelling), apart;
//   - the state, and the class of the last error, as their numbers
//     (package repostate), a byte each;
//   - the digest as its 16 bytes (an unusual spelling is kept as text);
//   - the error text as one shared copy of its template, the repository's
//     URL and key replaced by markers (package intern), since most errors
//     of a fleet differ only by the repository they name;
//   - attributes, fallback URLs and the replicas that do not hold the
//     recorded state, which few repositories have, apart.
//
// Callers that need the whole state ask for a RepoState, which is built
// for them (Get): a listing builds one per repository of its page.

// Entry is what the view keeps of one repository.
type Entry struct {
	errText    string     // packed by errs, "" without an error
	extra      *viewExtra // nil for most repositories
	lastCheck  int64      // unix ms
	lastChange int64      // unix ms
	checks     uint32     // saturating
	fetches    uint32     // saturating
	owner      uint32
	// verifiedAt is when the full node last saw the upstream's refs equal
	// to what it serves, in unix seconds (0: never): its own, kept across
	// the coordinator's updates (SetVerified).
	verifiedAt uint32
	// replicas indexes the view's table of replica sets (replicas.go):
	// a fleet has few distinct sets, so a repository's costs 4 bytes,
	// which the entry's padding had.
	replicas  replicaSet
	state     repostate.State
	class     repostate.Class // of errText
	usual     bool            // the URL is "https://" + key
	hasDigest bool            // digest holds a digest of 32 hex digits
	digest    [16]byte
}

// viewExtra holds what few repositories have.
type viewExtra struct {
	url       string // when the URL is not "https://" + key
	attrs     map[string]string
	fallbacks []string
	digest    string // a digest that is not 32 hex digits
	network   string // the fork network (RepoState.network), for the full node's object pools; its netIndex's name
	// differing are the replicas that do not hold the recorded state
	// (RepoState.replica_states): none while every replica holds it.
	differing []*fleetv1.ReplicaState
	// since is when a departed repository's state was first seen
	// (RepoState.state_since_ms, unix ms), kept only for those
	// (repostate.State.Departed, Archived): the API shows it, and the
	// full node serves a departed mirror for --retention from it.
	since int64
	// renamedTo is a renamed repository's new key (RepoState.renamed_to),
	// kept only in the state renamed.
	renamedTo string
}

// View is the full node's view of the fleet's repositories.
type View struct {
	tab  *repoTable // shared with the counters' classTable
	n    int
	errs *intern.Templates
	nets map[string]*netIndex // the members of each fork network
	sets replicaSets          // the distinct replica sets (replicas.go)
}

// maxErrTemplates bounds the error templates a view shares; texts past it
// are kept whole, each with its repository.
const maxErrTemplates = 1 << 16

// New returns an empty view and its counters, which keep a repository's
// entry and its class in one slot.
func New() (*View, *Counters) {
	c := newCounters()
	return newView(c.classes.tab), c
}

// newView returns an empty view kept in tab (nil: a table of its own).
func newView(tab *repoTable) *View {
	if tab == nil {
		tab = newRepoTable()
	}
	return &View{tab: tab, errs: intern.New(maxErrTemplates), nets: map[string]*netIndex{}}
}

// Len is how many repositories the view holds.
func (t *View) Len() int { return t.n }

// Has tells whether the view holds key.
func (t *View) Has(key repokey.Key) bool {
	s := t.tab.lookup(key)
	return s != nil && s.inView
}

// Keys yields every key, in no order.
func (t *View) Keys() iter.Seq[repokey.Key] {
	return func(yield func(repokey.Key) bool) {
		for k, s := range t.tab.each() {
			if s.inView && !yield(k) {
				return
			}
		}
	}
}

// Put stores r, the state of key (r.Key as the full node parsed it where
// the state arrived), and returns what was there before. The entry's
// verified_at is kept: it is the full node's own, not the coordinator's.
func (t *View) Put(key repokey.Key, r *fleetv1.RepoState) (old Entry, had bool) {
	s := t.tab.slot(key)
	old, had = s.view, s.inView
	v := Entry{lastCheck: r.GetLastCheckMs(), lastChange: r.GetLastChangeMs(), checks: sat32(r.GetChecks()),
		fetches: sat32(r.GetFetches()), owner: r.GetOwner(), state: parseState(r.GetState()),
		replicas: t.sets.id(r.GetReplicas())}
	if msg := r.GetLastError(); msg != "" {
		// A coordinator of a previous version sends no class: "failed".
		v.errText, v.class = t.errs.Pack(msg, r.GetUrl(), string(key)), repostate.ClassFromWire(r.GetClass()).OrOther()
	}
	var x viewExtra
	if u := r.GetUrl(); u == "https://"+string(key) {
		v.usual = true
	} else {
		x.url = u
	}
	if d := r.GetDigest(); d != "" {
		if v.digest, v.hasDigest = gitcmd.ParseDigest(d); !v.hasDigest {
			x.digest = d
		}
	}
	if len(r.GetAttrs()) > 0 {
		x.attrs = maps.Clone(r.GetAttrs())
	}
	if len(r.GetFallbackUrls()) > 0 {
		x.fallbacks = append([]string(nil), r.GetFallbackUrls()...)
	}
	net, oldNet := r.GetNetwork(), old.Network()
	if net != "" {
		x.network = t.netName(net) // the network's one copy of its name
	}
	for _, rs := range r.GetReplicaStates() {
		x.differing = append(x.differing, &fleetv1.ReplicaState{Node: rs.GetNode(), Confirmed: rs.GetConfirmed(),
			Digest: rs.GetDigest(), DiffersSinceMs: rs.GetDiffersSinceMs()})
	}
	if v.state.Departed() || v.state == repostate.Archived || v.state == repostate.Renamed {
		x.since = r.GetStateSinceMs()
	}
	if v.state == repostate.Renamed {
		x.renamedTo = r.GetRenamedTo()
	}
	if x.url != "" || x.attrs != nil || x.fallbacks != nil || x.digest != "" || x.network != "" || x.differing != nil || x.since != 0 || x.renamedTo != "" {
		v.extra = &x
	}
	v.verifiedAt = old.verifiedAt // the full node's own, not the coordinator's
	s.view, s.inView = v, true
	if !had {
		t.n++
	}
	if net != oldNet {
		t.leaveNet(oldNet, key)
		t.joinNet(x.network, key)
	}
	return old, had
}

// SetVerified records key's verified_at (unix seconds) and returns the
// one it replaces; false when key is not in the view.
func (t *View) SetVerified(key repokey.Key, at uint32) (uint32, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.inView {
		return 0, false
	}
	old := s.view.verifiedAt
	s.view.verifiedAt = at
	return old, true
}

// VerifiedTimes yields every key with its verified_at (unix seconds), in
// no order.
func (t *View) VerifiedTimes() iter.Seq2[repokey.Key, uint32] {
	return func(yield func(repokey.Key, uint32) bool) {
		for k, s := range t.tab.each() {
			if s.inView && !yield(k, s.view.verifiedAt) {
				return
			}
		}
	}
}

// Del removes key, and returns what was there.
func (t *View) Del(key repokey.Key) (Entry, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.inView {
		return Entry{}, false
	}
	v := s.view
	s.view, s.inView = Entry{}, false
	t.n--
	t.tab.release(key, s)
	t.leaveNet(v.Network(), key)
	return v, true
}

// Entry returns key's compact state.
func (t *View) Entry(key repokey.Key) (Entry, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.inView {
		return Entry{}, false
	}
	return s.view, true
}

// Get returns key's state as the coordinator sent it (a copy of the
// caller's own), or nil.
func (t *View) Get(key repokey.Key) *fleetv1.RepoState {
	v, ok := t.Entry(key)
	if !ok {
		return nil
	}
	return t.state(key, v)
}

// Replicas returns key's full nodes on the full tier, in placement order
// (a copy; nil when none or unknown), without building its whole state.
func (t *View) Replicas(key repokey.Key) []uint32 {
	v, ok := t.Entry(key)
	if !ok {
		return nil
	}
	return t.sets.members(v.replicas)
}

// Input is what a repository's class depends on in the view: the
// owner's last report and the full node's verified_at.
type Input struct {
	State      repostate.State
	Class      repostate.Class // of the last error
	Digest     string
	Owner      uint32
	LastCheck  int64  // unix ms
	VerifiedAt uint32 // unix seconds
}

// Input returns what key's class depends on, without building its whole
// state.
func (t *View) Input(key repokey.Key) (Input, bool) {
	v, ok := t.Entry(key)
	if !ok {
		return Input{}, false
	}
	in := Input{State: v.state, Class: v.class, Owner: v.owner, LastCheck: v.lastCheck, Digest: v.Digest(),
		VerifiedAt: v.verifiedAt}
	return in, true
}

// state builds the RepoState of key from v.
func (t *View) state(key repokey.Key, v Entry) *fleetv1.RepoState {
	r := &fleetv1.RepoState{Key: string(key), Url: v.Upstream(key), Owner: v.owner, Digest: v.Digest(),
		State: v.state.String(), LastCheckMs: v.lastCheck, LastChangeMs: v.lastChange, Checks: uint64(v.checks),
		Fetches: uint64(v.fetches), Class: uint32(v.class), Replicas: t.sets.members(v.replicas)}
	if v.errText != "" {
		r.LastError = intern.Unpack(v.errText, r.Url, string(key))
	}
	if v.extra != nil {
		r.Attrs = maps.Clone(v.extra.attrs)
		r.FallbackUrls = append([]string(nil), v.extra.fallbacks...)
		r.Network = v.extra.network
		for _, rs := range v.extra.differing {
			r.ReplicaStates = append(r.ReplicaStates, &fleetv1.ReplicaState{Node: rs.GetNode(), Confirmed: rs.GetConfirmed(),
				Digest: rs.GetDigest(), DiffersSinceMs: rs.GetDiffersSinceMs()})
		}
		r.StateSinceMs = v.extra.since
		r.RenamedTo = v.extra.renamedTo
	}
	return r
}

// parseState reads the state the coordinator sent: one this version does
// not know (a newer coordinator's) is shown as pending.
func parseState(name string) repostate.State {
	s, _ := repostate.Parse(name)
	return s
}

// Owner is the node that fetches the repository (0: none yet).
func (v Entry) Owner() uint32 { return v.owner }

// LastCheck is the owner's last check, in unix ms (0: none).
func (v Entry) LastCheck() int64 { return v.lastCheck }

// LastChange is when the owner last saw the repository change (unix ms).
func (v Entry) LastChange() int64 { return v.lastChange }

// RenamedTo is a renamed repository's new key ("": not renamed).
func (v Entry) RenamedTo() string {
	if v.extra == nil {
		return ""
	}
	return v.extra.renamedTo
}

// StateSince is when a departed or archived repository's state was
// first seen (unix ms; 0: unknown, or another state).
func (v Entry) StateSince() int64 {
	if v.extra == nil {
		return 0
	}
	return v.extra.since
}

// Checks and Fetches are the owners' checks and fetches of the
// repository, as the coordinator counts them (saturating).
func (v Entry) Checks() uint32 { return v.checks }

// Fetches: see Checks.
func (v Entry) Fetches() uint32 { return v.fetches }

// VerifiedAt is the full node's verified_at, in unix seconds (0: never).
func (v Entry) VerifiedAt() uint32 { return v.verifiedAt }

// Upstream is the repository's URL ("" if the coordinator sent none).
func (v Entry) Upstream(key repokey.Key) string {
	switch {
	case v.usual:
		return "https://" + string(key)
	case v.extra != nil:
		return v.extra.url
	}
	return ""
}

// Attrs are the repository's catalog attributes (nil: none); the map is
// the view's, not to be changed.
func (v Entry) Attrs() map[string]string {
	if v.extra != nil {
		return v.extra.attrs
	}
	return nil
}

// Network is the repository's fork network ("" for none).
func (v Entry) Network() string {
	if v.extra != nil {
		return v.extra.network
	}
	return ""
}

// Digest is the digest of the owner's mirror, as the owner reported it.
func (v Entry) Digest() string {
	switch {
	case v.hasDigest:
		return hex.EncodeToString(v.digest[:])
	case v.extra != nil:
		return v.extra.digest
	}
	return ""
}

func sat32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }
