package gitserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// hiddenRefs is the namespace of a mirror's own refs (the kept tips of
// deleted refs: mirror.TombstoneRefs), never advertised nor served, nor
// counted as reaching a wanted commit.
const hiddenRefs = "refs/gitfleet/"

// maxWants bounds the object ids of one request that are checked (a
// partial clone's lazy fetch asks for many blobs at once).
const maxWants = 50000

// checkWants refuses a request for objects that the served refs do not
// reach. protocol v2's upload-pack serves any object it has, so a commit
// that the upstream force-pushed away (a leaked secret, say) could
// otherwise be fetched by its id until it is dropped from disk.
//
// Commits and tags must be reachable from a ref (a ref's tip is, at no
// cost), or be a tip that the repository advertised a moment ago (recent,
// when not nil: see recentTips); trees and blobs, which a partial clone
// asks for by id and whose ids only a reachable commit gives away, are
// only checked to exist.
func checkWants(ctx context.Context, git *gitcmd.Runner, dir string, wants []string, recent func(oid string) bool) error {
	if len(wants) == 0 {
		return nil
	}
	if len(wants) > maxWants {
		return refused("more than %d objects wanted in one request", maxWants)
	}
	in := strings.Join(wants, "\n") + "\n"
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "cat-file",
		Flags: []string{"--batch-check=%(objectname) %(objecttype)"}, Stdin: strings.NewReader(in)})
	if err != nil {
		return fmt.Errorf("listing the wanted objects: %w", err)
	}
	var commits bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		oid, typ, _ := strings.Cut(sc.Text(), " ")
		switch typ {
		case "commit", "tag":
			if recent != nil && recent(oid) {
				continue // on disk, and advertised within the grace
			}
			commits.WriteString(oid + "\n")
		case "tree", "blob":
		default: // "missing"
			return missing(ctx, git, dir, oid)
		}
	}
	if commits.Len() == 0 {
		return nil
	}
	// What the wanted commits reach that no ref reaches; nothing when
	// every one is reachable (a ref's tip stops the walk at once).
	out, err = git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "rev-list",
		Flags: []string{"--max-count=1", "--not", "--exclude=" + hiddenRefs + "*", "--all", "--not", "--stdin"}, Stdin: &commits})
	if err != nil {
		return fmt.Errorf("checking that the wanted commits are served: %w", err)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return refused("not our ref %s: only what the served refs reach is served", truncate(string(bytes.TrimSpace(out))))
	}
	return nil
}

// missing answers a wanted object that the repository does not have: a
// refusal, unless a served ref points at it, when the mirror is damaged (a
// truncated pack, an emptied object file) and the caller must hear of it
// as a failure, not tell the client that its want is not ours.
func missing(ctx context.Context, git *gitcmd.Runner, dir, oid string) error {
	if !gitcmd.IsOID(oid) {
		return refused("not our ref %s", truncate(oid))
	}
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "for-each-ref",
		Flags: []string{"--count=1", "--format=%(refname)", "--points-at=" + oid}, Args: []string{"refs/heads/", "refs/tags/"}})
	if err != nil {
		return fmt.Errorf("looking for the refs of a missing object: %w", err)
	}
	if ref := strings.TrimSpace(string(out)); ref != "" {
		return &gitcmd.Error{Args: []string{"cat-file", oid}, Class: gitcmd.ClassBadObjects,
			Stderr: fmt.Sprintf("%s points at %s, which the repository cannot read: the mirror is damaged", ref, oid)}
	}
	return refused("not our ref %s", truncate(oid))
}
