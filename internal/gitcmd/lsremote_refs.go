package gitcmd

import "context"

// LsRemoteRefs asks url for HEAD and the named refs only (full names, e.g.
// "refs/heads/main"); with no names, for every branch and tag, as LsRemote.
// The names are ls-remote patterns: git 2.39 still lists every ref over the
// wire and filters on its side, so this saves parsing, not requests.
func (r *Runner) LsRemoteRefs(ctx context.Context, url string, names []string) (Refs, error) {
	if len(names) == 0 {
		return r.LsRemote(ctx, url)
	}
	args := append([]string{url, "HEAD"}, names...)
	out, err := r.Output(ctx, Cmd{Name: "ls-remote", Flags: []string{"--symref"}, Args: args})
	if err != nil {
		return Refs{}, err
	}
	all := parseLsRemote(out)
	// ls-remote matches patterns by their tail: keep the exact names.
	refs := Refs{Refs: make(map[string]string, len(names)), Head: all.Head}
	for _, n := range names {
		if oid, ok := all.Refs[n]; ok {
			refs.Refs[n] = oid
		}
	}
	return refs, nil
}
