package mirror

import (
	"context"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// ListUpstream answers a verified pull's question to key's upstream at url
// (see UpstreamRefs): the named refs with HEAD's symref, or, with names
// nil (a first pull, or more than maxNamedRefs changes), every branch and
// tag under the limits, as a check lists them (gitcmd.ListRefs: only
// branches and tags are asked for, so an upstream's other refs never cross
// the network; past MaxRefs git is stopped with ClassTooManyRefs; names
// over MaxRefLength are left out and logged), and HEAD's symref beside it.
func (s *Store) ListUpstream(ctx context.Context, key, url string, names []string) (gitcmd.Refs, error) {
	if len(names) > 0 {
		return s.git.LsRemoteRefs(ctx, url, names)
	}
	// HEAD is asked beside the listing, as a sync asks it: the pull waits
	// for one round trip, not two. (git 2.39's ls-remote sends no ref
	// prefix for HEAD: the upstream lists every ref to it, and it prints
	// HEAD only, as for a clone.)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type headAnswer struct {
		head string
		err  error
	}
	headc := make(chan headAnswer, 1)
	go func() {
		h, err := s.git.RemoteHead(ctx, url)
		headc <- headAnswer{h, err}
	}()
	l, err := s.listRefs(ctx, key, url)
	if err != nil {
		cancel() // the answer is an error whatever HEAD is
		<-headc
		return gitcmd.Refs{}, err
	}
	ha := <-headc
	if ha.err != nil {
		return gitcmd.Refs{}, ha.err
	}
	return gitcmd.Refs{Refs: l.Refs.Refs, Head: ha.head}, nil
}
