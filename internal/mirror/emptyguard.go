package mirror

import (
	"errors"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// ErrEmptyAdvertisement is a Sync refused because its source suddenly
// advertises no branches or tags for a mirror that has some. The same source
// saying so again at a check at least EmptyConfirmAfter after the first is
// believed.
var ErrEmptyAdvertisement = errors.New("the source advertises no branches or tags (not applied until a later check confirms it)")

// DefaultEmptyConfirmAfter is how long after a first empty advertisement
// another one from the same source is believed, unless SetEmptyConfirmAfter
// says otherwise. An hour outlasts the outages and botched migrations that
// empty a repository for a while, and an on-demand check (a webhook, the
// API) cannot make it shorter.
const DefaultEmptyConfirmAfter = time.Hour

// emptyGuard remembers, per key, the source whose empty advertisement was
// refused, and when it was first seen.
type emptyGuard struct {
	mu    sync.Mutex
	after time.Duration // 0: DefaultEmptyConfirmAfter
	seen  map[repokey.Key]emptySeen
}

type emptySeen struct {
	url   string
	first time.Time
}

// admit returns ErrEmptyAdvertisement when url advertises nothing for a
// mirror that holds refs, unless url said so first at least g.after before
// now, with nothing but empty advertisements from it in between. confirmed
// tells that it lets an emptying through.
func (g *emptyGuard) admit(key repokey.Key, url string, before, remote gitcmd.Refs, now time.Time) (confirmed bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(remote.Refs) > 0 || len(before.Refs) == 0 {
		delete(g.seen, key)
		return false, nil
	}
	after := g.after
	if after <= 0 {
		after = DefaultEmptyConfirmAfter
	}
	if s, ok := g.seen[key]; ok && s.url == url {
		if now.Sub(s.first) >= after {
			delete(g.seen, key)
			return true, nil
		}
		return false, ErrEmptyAdvertisement // the first sighting stands: checks in between do not move it
	}
	if g.seen == nil {
		g.seen = map[repokey.Key]emptySeen{}
	}
	g.seen[key] = emptySeen{url: url, first: now}
	return false, ErrEmptyAdvertisement
}

// SetEmptyConfirmAfter sets how long after a source's first empty
// advertisement for a mirror that holds refs another one is believed (0:
// DefaultEmptyConfirmAfter). Call it before the store is used.
func (s *Store) SetEmptyConfirmAfter(d time.Duration) {
	s.empty.mu.Lock()
	s.empty.after = d
	s.empty.mu.Unlock()
}
