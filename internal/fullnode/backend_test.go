package fullnode

import (
	"context"
	"testing"

	"github.com/gitfleet/gitfleet/internal/repokey"
)

// A repository's detail reads its refs with git under the request's
// context: a request that has gone (its client hung up) runs no git for
// them.
func TestARepositorysDetailReadsItsRefsUnderTheRequestsContext(t *testing.T) {
	r := newUpstreamRig(t, Config{})
	d, ok := r.f.backend.GetRepo(t.Context(), repokey.Key(r.key))
	if !ok || len(d.Refs) == 0 {
		t.Fatalf("detail %v, refs %v: want the served refs", ok, d.Refs)
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	d, ok = r.f.backend.GetRepo(gone, repokey.Key(r.key))
	if !ok || len(d.Refs) != 0 {
		t.Fatalf("under a cancelled request: detail %v, refs %v; want the repository without its refs", ok, d.Refs)
	}
}
