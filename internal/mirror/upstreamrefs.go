package mirror

import (
	"context"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// ListUpstream answers a verified pull's question to key's upstream at url
// (see UpstreamRefs): the named refs with HEAD's symref, or, with names
// nil (a first pull, or more than maxNamedRefs changes), every branch and
// tag under the limits, with HEAD's symref, in the one listing a first
// mirror makes (listFirst: past MaxRefs git is stopped with
// ClassTooManyRefs; names over MaxRefLength, or that git would not write,
// are left out and logged).
func (s *Store) ListUpstream(ctx context.Context, key repokey.Key, url string, names []string) (gitcmd.Refs, error) {
	if len(names) > 0 {
		return s.git.LsRemoteRefs(ctx, url, names)
	}
	l, err := s.listFirst(ctx, key, url)
	if err != nil {
		return gitcmd.Refs{}, err
	}
	return l.Refs, nil
}

// ListSource lists every branch and tag of src, with HEAD's symref, under
// the limits, as ListUpstream lists an upstream with names nil: a peer
// full node's copy of key, reached through this machine's tunnel proxy
// (src.URL on a loopback address), whose credentials src.Env carries.
func (s *Store) ListSource(ctx context.Context, key repokey.Key, src Source) (gitcmd.Refs, error) {
	l, err := s.git.ListPeerRefsAndHead(ctx, src.URL, src.Env, s.refLimits())
	if err != nil {
		return gitcmd.Refs{}, err
	}
	s.logSkipped(key, l.Skipped)
	return l.Refs, nil
}
