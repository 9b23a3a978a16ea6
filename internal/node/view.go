package node

import (
	"encoding/hex"
	"iter"
	"maps"
	"math"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/intern"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// A full node keeps the coordinator's state of every repository of the
// fleet: a million of them on a large mirror. A fleetv1.RepoState in a
// map costs about 530 bytes with its strings (the message, its key, URL,
// state and digest strings, and an error text that names the repository),
// the view about 185 with its key and map entry
// (TestViewIsAFractionOfTheMessages); a repoView keeps the same facts, and
// the full node's own verified_at (4 bytes), in 80 bytes:
//   - the URL only when it is not https://KEY (the usual spelling), apart;
//   - the state as an index into a table of the few state names;
//   - the digest as its 16 bytes (an unusual spelling is kept as text);
//   - the error text as one shared copy of its template, the repository's
//     URL and key replaced by markers (package intern), since most errors
//     of a fleet differ only by the repository they name;
//   - attributes and fallback URLs, which few repositories have, apart.
//
// Callers that need the whole state ask for a RepoState, which is built
// for them (get): a listing builds one per repository of its page.

// repoView is what the full node keeps of one repository.
type repoView struct {
	errText    string     // packed by errs, "" without an error
	extra      *viewExtra // nil for most repositories
	lastCheck  int64      // unix ms
	lastChange int64      // unix ms
	checks     uint32     // saturating
	fetches    uint32     // saturating
	owner      uint32
	// verifiedAt is when the full node last saw the upstream's refs equal
	// to what it serves, in unix seconds (0: never): its own, kept across
	// the coordinator's updates (freshness.go).
	verifiedAt uint32
	state      uint8 // numbered by viewTable.states
	usual      bool  // the URL is "https://" + key
	hasDigest  bool  // digest holds a digest of 32 hex digits
	digest     [16]byte
}

// viewExtra holds what few repositories have.
type viewExtra struct {
	url       string // when the URL is not "https://" + key
	attrs     map[string]string
	fallbacks []string
	digest    string // a digest that is not 32 hex digits
}

// viewTable is the full node's view of the fleet's repositories, guarded
// by fullNode.mu.
type viewTable struct {
	tab    *repoTable // shared with the counters' classTable
	n      int
	states nameTable // state names
	errs   *intern.Templates
}

// maxErrTemplates bounds the error templates a view shares; texts past it
// are kept whole, each with its repository.
const maxErrTemplates = 1 << 16

// newViewTable returns an empty view kept in tab (nil: a table of its
// own).
func newViewTable(tab *repoTable) *viewTable {
	if tab == nil {
		tab = newRepoTable()
	}
	return &viewTable{tab: tab, errs: intern.New(maxErrTemplates)}
}

func (t *viewTable) len() int { return t.n }

func (t *viewTable) has(key string) bool {
	s := t.tab.lookup(key)
	return s != nil && s.inView
}

// keys yields every key, in no order.
func (t *viewTable) keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		for k, s := range t.tab.each() {
			if s.inView && !yield(k) {
				return
			}
		}
	}
}

// put stores r, and returns what was there before.
func (t *viewTable) put(r *fleetv1.RepoState) (old repoView, had bool) {
	key := r.GetKey()
	s := t.tab.slot(key)
	old, had = s.view, s.inView
	v := repoView{lastCheck: r.GetLastCheckMs(), lastChange: r.GetLastChangeMs(), checks: sat32(r.GetChecks()),
		fetches: sat32(r.GetFetches()), owner: r.GetOwner(), state: t.states.id(r.GetState())}
	if msg := r.GetLastError(); msg != "" {
		v.errText = t.errs.Pack(msg, r.GetUrl(), key)
	}
	var x viewExtra
	if u := r.GetUrl(); u == "https://"+key {
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
	if x.url != "" || x.attrs != nil || x.fallbacks != nil || x.digest != "" {
		v.extra = &x
	}
	v.verifiedAt = old.verifiedAt // the full node's own, not the coordinator's
	s.view, s.inView = v, true
	if !had {
		t.n++
	}
	return old, had
}

// setVerified records key's verified_at (unix seconds) and returns the
// one it replaces; false when key is not in the view.
func (t *viewTable) setVerified(key string, at uint32) (uint32, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.inView {
		return 0, false
	}
	old := s.view.verifiedAt
	s.view.verifiedAt = at
	return old, true
}

// verifiedTimes yields every key with its verified_at (unix seconds), in
// no order.
func (t *viewTable) verifiedTimes() iter.Seq2[string, uint32] {
	return func(yield func(string, uint32) bool) {
		for k, s := range t.tab.each() {
			if s.inView && !yield(k, s.view.verifiedAt) {
				return
			}
		}
	}
}

// del removes key, and returns what was there.
func (t *viewTable) del(key string) (repoView, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.inView {
		return repoView{}, false
	}
	v := s.view
	s.view, s.inView = repoView{}, false
	t.n--
	t.tab.release(key, s)
	return v, true
}

// view returns key's compact state.
func (t *viewTable) view(key string) (repoView, bool) {
	s := t.tab.lookup(key)
	if s == nil || !s.inView {
		return repoView{}, false
	}
	return s.view, true
}

// get returns key's state as the coordinator sent it (a copy of the
// caller's own), or nil.
func (t *viewTable) get(key string) *fleetv1.RepoState {
	v, ok := t.view(key)
	if !ok {
		return nil
	}
	return t.state(key, v)
}

// classInput returns what key's class depends on (counters.go), without
// the rest of its state.
func (t *viewTable) classInput(key string) (classInput, bool) {
	v, ok := t.view(key)
	if !ok {
		return classInput{}, false
	}
	in := classInput{state: t.states.name(v.state), owner: v.owner, lastCheck: v.lastCheck, digest: v.digestString(),
		verifiedAt: v.verifiedAt}
	if v.errText != "" {
		in.lastError = intern.Unpack(v.errText, v.upstream(key), key)
	}
	return in, true
}

// state builds the RepoState of key from v.
func (t *viewTable) state(key string, v repoView) *fleetv1.RepoState {
	r := &fleetv1.RepoState{Key: key, Url: v.upstream(key), Owner: v.owner, Digest: v.digestString(),
		State: t.states.name(v.state), LastCheckMs: v.lastCheck, LastChangeMs: v.lastChange, Checks: uint64(v.checks),
		Fetches: uint64(v.fetches)}
	if v.errText != "" {
		r.LastError = intern.Unpack(v.errText, r.Url, key)
	}
	if v.extra != nil {
		r.Attrs = maps.Clone(v.extra.attrs)
		r.FallbackUrls = append([]string(nil), v.extra.fallbacks...)
	}
	return r
}

func (v repoView) upstream(key string) string {
	switch {
	case v.usual:
		return "https://" + key
	case v.extra != nil:
		return v.extra.url
	}
	return ""
}

func (v repoView) digestString() string {
	switch {
	case v.hasDigest:
		return hex.EncodeToString(v.digest[:])
	case v.extra != nil:
		return v.extra.digest
	}
	return ""
}

func sat32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }
