package mirror

import (
	"errors"
	"sync"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// ErrEmptyAdvertisement is a Sync refused because its source suddenly
// advertises no branches or tags for a mirror that has some. The same source
// saying so again at the next Sync is believed.
var ErrEmptyAdvertisement = errors.New("the source advertises no branches or tags (not applied until a later check confirms it)")

// emptyGuard remembers, per key, the source whose empty advertisement was
// refused once.
type emptyGuard struct {
	mu   sync.Mutex
	seen map[string]string // key -> URL
}

// admit returns ErrEmptyAdvertisement when url advertises nothing for a
// mirror that holds refs, unless url said so at the previous Sync of key.
func (g *emptyGuard) admit(key, url string, before, remote gitcmd.Refs) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(remote.Refs) > 0 || len(before.Refs) == 0 {
		delete(g.seen, key)
		return nil
	}
	if g.seen[key] == url {
		delete(g.seen, key)
		return nil // confirmed
	}
	if g.seen == nil {
		g.seen = map[string]string{}
	}
	g.seen[key] = url
	return ErrEmptyAdvertisement
}
