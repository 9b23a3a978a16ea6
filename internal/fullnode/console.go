package fullnode

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/console"
	"github.com/gitfleet/gitfleet/internal/fetchlog"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/repoview"
	"github.com/gitfleet/gitfleet/internal/series"
	fleetv1 "github.com/gitfleet/gitfleet/proto/gitfleet/v1"
)

// consoleSource is what the full node tells its console (package
// console): listings that cost a page, figures from the counters and from
// its series (trends.go).
type consoleSource struct {
	f      *Node
	search searchIndex
}

var _ console.Source = (*consoleSource)(nil)

func newConsoleSource(f *Node) *consoleSource { return &consoleSource{f: f} }

// maxFetchingShown bounds the repositories the overview names as being
// pulled.
const maxFetchingShown = 20

func (s *consoleSource) Overview(r series.Range) console.Overview {
	f := s.f
	t := f.totals()
	now := f.clk.Now()
	ov := console.Overview{Total: t.total, Current: t.current, ByState: t.byState, Trend: f.series.Window(r, now, console.ChartPoints),
		Tunnels: len(f.tunnels.Nodes())}
	f.mu.Lock()
	ov.Staleness = f.counts.Staleness(now, console.StaleBuckets)
	ov.Errors = f.counts.ErrorClasses()
	for _, k := range f.plan.Pulling() {
		ov.Fetching = append(ov.Fetching, k.String())
	}
	ov.FetchingTotal = len(ov.Fetching)
	f.mu.Unlock()
	slices.Sort(ov.Fetching)
	ov.Fetching = ov.Fetching[:min(len(ov.Fetching), maxFetchingShown)]
	return ov
}

// GetRepo is key's detail: the API's, with the dates of its refs' tips
// (read with the refs), the size of the full node's copy (a walk of its
// directory), its next check if the full node owns it, and the last work
// on it that succeeded (one read of its log).
func (s *consoleSource) GetRepo(ctx context.Context, key string) (console.Detail, bool) {
	f := s.f
	k, ok := keyOf(key)
	if !ok {
		return console.Detail{}, false
	}
	d, refs, ok := f.backend.detail(ctx, k)
	if !ok {
		return console.Detail{}, false
	}
	f.mu.Lock()
	fallbacks := f.view.Get(k).GetFallbackUrls()
	f.mu.Unlock()
	out := console.Detail{RepoDetail: d, Fallbacks: fallbacks, RefTimes: refs.Times, Size: -1}
	if f.mirror.Has(k) {
		if size, err := mirror.TreeSize(f.mirror.Path(k)); err == nil {
			out.Size = size
		}
	}
	if d.Owner != 0 && d.Owner == f.n.ID() {
		out.NextCheck, _ = f.n.NextCheck(k)
	}
	if es, _, err := f.flog.List(ctx, fetchlog.Query{Key: key, Result: fetchlog.ResultOK, Limit: 1}); err == nil && len(es) > 0 {
		out.LastSuccess = es[0].At
	}
	return out, true
}

// Log is a page of key's fetch log, as the API's log pages it.
func (s *consoleSource) Log(ctx context.Context, key, before string, limit int) ([]fetchlog.Entry, string, error) {
	return s.f.flog.List(ctx, fetchlog.Query{Key: key, Before: before, Limit: limit})
}

// Status is key as the API lists it: the view's state and the full node's
// freshness, a stat of its copy; no git.
func (s *consoleSource) Status(key string) (api.Repo, bool) {
	f := s.f
	k, ok := keyOf(key)
	if !ok {
		return api.Repo{}, false
	}
	f.mu.Lock()
	st := f.view.Get(k)
	f.mu.Unlock()
	if st == nil {
		return api.Repo{}, false
	}
	return f.backend.repo(k, st, f.clk.Now()), true
}

func (s *consoleSource) Nodes(ctx context.Context) ([]api.Node, error) { return s.f.fleet.Nodes(ctx) }

func (s *consoleSource) Catalog(ctx context.Context) (api.CatalogStatus, error) {
	return s.f.fleet.Catalog(ctx)
}

func (s *consoleSource) Tunnels() []uint32 { return s.f.tunnels.Nodes() }

// Feeds are the forges' change feeds as the coordinator last said.
func (s *consoleSource) Feeds() []api.FeedStatus { return s.f.Feeds() }

// maxConsoleExamined bounds the keys one search or staleness page looks
// at after the index (50 ms of work or so at the worst).
const maxConsoleExamined = 50000

// Repos answers a page of /-/repos. Without a search or a staleness
// filter it is the API's listing (an index, the page, a total). A
// staleness filter walks the keys by minute of last check from the
// oldest; a search scans the keys (searchIndex); both stop at the page,
// and check the other filters on the way.
func (s *consoleSource) Repos(ctx context.Context, q console.Query) console.Page {
	f := s.f
	if q.Search == "" && q.StaleOver == 0 && !q.Never {
		repos, total := f.backend.ListRepos(ctx, api.RepoFilter{State: q.State, Owner: q.Owner, Network: q.Network, Offset: q.Offset, Limit: q.Limit})
		return console.Page{Repos: repos, Total: total, More: q.Offset+len(repos) < total}
	}
	needle := strings.ToLower(q.Search)
	var found []repoview.Listed
	// keep tells whether key matches the filters other than the search
	// (and the staleness, which the walk by minute already applied);
	// called with f.mu held.
	keep := func(key repokey.Key) *fleetv1.RepoState {
		cl, ok := f.counts.Class(key)
		if !ok || q.State != nil && cl.State != *q.State || q.Owner != 0 && cl.Owner != q.Owner {
			return nil
		}
		if st := f.view.Get(key); q.Network == "" || st.GetNetwork() == q.Network {
			return st
		}
		return nil
	}
	skip := q.Offset
	// A request of the public cannot make the node look at every key
	// (with f.mu held, for a staleness filter): past maxConsoleExamined
	// candidates it stops, and the page says there may be more.
	examined, capped := 0, false
	enough := func() bool {
		examined++
		if examined > maxConsoleExamined {
			capped = true
			return true
		}
		return false
	}
	take := func(key repokey.Key, st *fleetv1.RepoState) bool {
		if skip > 0 {
			skip--
			return true
		}
		found = append(found, repoview.Listed{Key: key, State: st})
		return len(found) <= q.Limit
	}
	now := f.clk.Now()
	if q.StaleOver > 0 || q.Never {
		s.stalest(now, q, func(key repokey.Key) bool {
			if enough() {
				return false
			}
			if needle != "" && !strings.Contains(strings.ToLower(key.String()), needle) {
				return true
			}
			if st := keep(key); st != nil {
				return take(key, st)
			}
			return true
		})
	} else {
		f.mu.Lock()
		keys := f.sorted.Of(f.view)
		f.mu.Unlock()
		s.search.each(keys, needle, func(key repokey.Key) bool {
			if enough() {
				return false
			}
			f.mu.Lock()
			st := keep(key)
			f.mu.Unlock()
			if st == nil {
				return true
			}
			return take(key, st)
		})
	}
	page := console.Page{Total: -1, More: len(found) > q.Limit || capped}
	found = found[:min(len(found), q.Limit)]
	for _, m := range found {
		page.Repos = append(page.Repos, f.backend.repo(m.Key, m.State, now))
	}
	return page
}

// stalest calls yield with f.mu held for the keys last checked longer
// than q.StaleOver before now (the never checked first, then from the
// oldest minute; only those with q.Never), until it returns false.
func (s *consoleSource) stalest(now time.Time, q console.Query, yield func(key repokey.Key) bool) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.Stalest(repoview.VerifiedMinute(now.Add(-q.StaleOver).UnixMilli()), q.Never, yield)
}

// searchIndex finds the keys that hold a substring without looking at
// each: a scan of one mask a key (the runs of two and of three bytes it
// holds, hashed to 256 bits) keeps the keys that hold every run of the
// substring, and only those are searched. The keys are kept in lower case
// in one block of bytes, separated by newlines; a substring of one byte is
// one bytes.Index over the block. The index is rebuilt when the key set
// changed (a merge of the sorted index gives a new slice): O(keys) after a
// catalog change, not each request.
type searchIndex struct {
	mu     sync.Mutex
	keys   []repokey.Key // the sorted keys it was built from
	blob   []byte        // "\n" + key0 + "\n" + key1 + "\n" ...
	starts []uint32      // where each key starts in blob, and the end
	masks  []runMask     // each key's runs
}

// runMask is a set of runs of two and three bytes, hashed to 256 bits.
type runMask [4]uint64

// maskOf is the mask of the runs of s.
func maskOf(s []byte) (m runMask) {
	set := func(run uint32) {
		bit := run * 0x9E3779B1 >> 24 // 0..255
		m[bit>>6] |= 1 << (bit & 63)
	}
	for i := 0; i+1 < len(s); i++ {
		set(uint32(s[i])<<8 | uint32(s[i+1]))
		if i+2 < len(s) {
			set(1<<24 | uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2]))
		}
	}
	return m
}

// holds tells whether m has every run of q.
func (m *runMask) holds(q *runMask) bool {
	return m[0]&q[0] == q[0] && m[1]&q[1] == q[1] && m[2]&q[2] == q[2] && m[3]&q[3] == q[3]
}

// each calls yield for the keys that contain needle (in lower case), in
// order, until it returns false.
func (x *searchIndex) each(keys []repokey.Key, needle string, yield func(key repokey.Key) bool) {
	x.mu.Lock()
	if len(keys) != len(x.keys) || len(keys) > 0 && &keys[0] != &x.keys[0] {
		x.build(keys)
	}
	blob, starts, masks, keys := x.blob, x.starts, x.masks, x.keys
	x.mu.Unlock()
	if needle == "" || strings.Contains(needle, "\n") {
		return
	}
	n := []byte(needle)
	if len(n) == 1 {
		for pos := 0; pos < len(blob); {
			i := bytes.IndexByte(blob[pos:], n[0])
			if i < 0 {
				return
			}
			// The key that holds the match: the last that starts at or before it.
			k := sort.Search(len(keys), func(j int) bool { return int(starts[j]) > pos+i }) - 1
			if !yield(keys[k]) {
				return
			}
			pos = int(starts[k+1])
		}
		return
	}
	q := maskOf(n)
	for k := range masks {
		if masks[k].holds(&q) && bytes.Contains(blob[starts[k]:starts[k+1]], n) && !yield(keys[k]) {
			return
		}
	}
}

func (x *searchIndex) build(keys []repokey.Key) {
	size := 1
	for _, k := range keys {
		size += len(k) + 1
	}
	blob := make([]byte, 0, size)
	starts := make([]uint32, len(keys)+1)
	masks := make([]runMask, len(keys))
	blob = append(blob, '\n')
	for i, k := range keys {
		starts[i] = uint32(len(blob))
		for j := 0; j < len(k); j++ {
			c := k[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			blob = append(blob, c)
		}
		masks[i] = maskOf(blob[starts[i]:])
		blob = append(blob, '\n')
	}
	starts[len(keys)] = uint32(len(blob))
	x.keys, x.blob, x.starts, x.masks = keys, blob, starts, masks
}
