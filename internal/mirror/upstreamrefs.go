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
