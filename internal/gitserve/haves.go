package gitserve

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// servedHaves returns the request body without the have lines that name
// an object the served refs do not reach. upload-pack acknowledges every
// have whose object it holds ("ACK <id> common" in v0, "ACK <id>" in v2),
// reachable or not: left alone, it would tell a client that the commit an
// upstream force-pushed away (or another fork's, which a pool member
// borrows) is still here, and leave it out of the pack as common. A have
// dropped is answered as one of an object this mirror never had (no
// ACK), which is what git's negotiation expects of any server; a have that
// is a served tip, or that the refs reach, goes through. The body is
// returned as it came when nothing is dropped.
//
// A set of haves that the refs were found to reach is not looked at again
// under the same refs, as wants are not (wantsServed).
func (h *Handler) servedHaves(ctx context.Context, v *refsView, body []byte, haves []string) ([]byte, error) {
	if len(haves) > maxWants {
		return nil, refused("more than %d haves in one request", maxWants)
	}
	haves = v.nonTips(haves)
	if len(haves) == 0 {
		return body, nil
	}
	k := "have\x00" + wantsKey(haves)
	v.mu.Lock()
	known := v.reachable[k]
	v.mu.Unlock()
	if known {
		return body, nil
	}
	h.shares.checks.Add(1)
	unreached, refsOnly, err := unreachedHaves(ctx, h.Git, v.dir, haves)
	if err != nil {
		return nil, err
	}
	if len(unreached) == 0 {
		if refsOnly {
			v.mu.Lock()
			v.reachable[k] = true
			v.mu.Unlock()
			v.views.grow(v, int64(len(k)))
		}
		return body, nil
	}
	return dropHaves(body, unreached), nil
}

// unreachedHaves tells which of haves name an object on disk that the
// served refs do not reach: a commit that no ref reaches, or any object
// that is not a commit (git's negotiation sends commits only: a tree or a
// blob as a have only asks whether it is here). refsOnly says that the
// answer depends on the refs alone: every have is a commit on disk that
// they reach (a missing object may arrive under the same refs, in a pool).
func unreachedHaves(ctx context.Context, git *gitcmd.Runner, dir string, haves []string) (unreached map[string]bool, refsOnly bool, err error) {
	unreached = map[string]bool{}
	refsOnly = true
	commits := map[string]bool{}
	var in strings.Builder
	err = objectTypes(ctx, git, dir, haves, func(oid, typ string) {
		switch typ {
		case "commit":
			commits[oid] = true
			in.WriteString(oid + "\n")
		case "missing":
			refsOnly = false // upload-pack acknowledges none
		default:
			unreached[oid] = true
		}
	})
	if err != nil {
		return nil, false, err
	}
	if len(commits) == 0 {
		return unreached, refsOnly && len(unreached) == 0, nil
	}
	// The commits that the haves reach and no ref does: each have that is
	// one of them is not ours. A have that the refs reach is never listed.
	found := 0
	err = listObjects(ctx, git, gitcmd.Cmd{GitDir: dir, Name: "rev-list",
		Flags: []string{"--not", "--exclude=" + hiddenRefs + "*", "--all", "--not", "--stdin"},
		Stdin: strings.NewReader(in.String())}, func(oid string) bool {
		if commits[oid] && !unreached[oid] {
			unreached[oid] = true
			found++
		}
		return found == len(commits)
	})
	if err != nil {
		return nil, false, fmt.Errorf("checking that the haves are served: %w", err)
	}
	return unreached, refsOnly && len(unreached) == 0, nil
}

// dropHaves returns body, a request that parseRequest took, without its
// have lines that name an object of drop.
func dropHaves(body []byte, drop map[string]bool) []byte {
	out := make([]byte, 0, len(body))
	for len(body) >= 4 {
		n, err := strconv.ParseUint(string(body[:4]), 16, 16)
		if err != nil || int(n) > len(body) {
			break // not reached: the body was parsed whole
		}
		if n <= 2 {
			n = 4
		}
		line := body[:n]
		body = body[n:]
		if oid, ok := bytes.CutPrefix(bytes.TrimSuffix(line[4:], []byte("\n")), []byte("have ")); ok && drop[string(oid)] {
			continue
		}
		out = append(out, line...)
	}
	return append(out, body...)
}
