package gitserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// hiddenRefs is the namespace of a mirror's own refs (the kept tips of
// deleted refs: mirror.TombstoneRefs), never advertised nor served, nor
// counted as reaching a wanted commit.
const hiddenRefs = "refs/gitfleet/"

// archiveRefs is the namespace of the tips that rewrites and deletions
// took away, kept when the repository archives them (mirror.ArchiveRefs):
// never advertised (v0, v2's ls-refs), but counted as reaching a wanted
// object, so that what they keep is served by id (upload-pack is run with
// uploadpack.allowReachableSHA1InWant, which counts hidden refs; the
// checks here, run first, leave out hiddenRefs alone).
const archiveRefs = "refs/archive/"

// unadvertised tells whether a ref is never advertised.
func unadvertised(name string) bool {
	return strings.HasPrefix(name, hiddenRefs) || strings.HasPrefix(name, archiveRefs)
}

// maxWants bounds the object ids of one request that are checked (a
// partial clone's lazy fetch asks for many blobs at once).
const maxWants = 50000

// wantsServed refuses a request for objects that the served refs do not
// reach (see checkWants), and shares what it can between the requests that
// find the refs in v's state: a want that is a served tip needs no process
// (should its object not be on disk, in a damaged mirror, the run fails
// and says so: see damagedTip), and a set of wants that the refs were
// found to reach is not looked at again (a prune drops only what they do
// not reach). What depends on more than the refs is checked anew each
// time: a tip advertised a moment ago (recent). Identical checks in
// flight are made once.
func (h *Handler) wantsServed(ctx context.Context, v *refsView, key string, wants []string, v2 bool) error {
	if len(wants) > maxWants {
		return refused("more than %d objects wanted in one request", maxWants)
	}
	wants = v.nonTips(wants)
	if len(wants) == 0 {
		return nil
	}
	k := wantsKey(wants)
	v.mu.Lock()
	if v.reachable[k] {
		v.mu.Unlock()
		return nil
	}
	f, leader := join(v.checks, k)
	v.mu.Unlock()
	if !leader {
		_, err := f.wait(ctx)
		return err
	}
	// The check goes on for the requests that wait for it if this one's
	// client leaves.
	h.shares.checks.Add(1)
	refsOnly, err := checkWants(context.WithoutCancel(ctx), h.Git, v.dir, wants, h.recent(key, v2))
	v.mu.Lock()
	delete(v.checks, k)
	keep := err == nil && refsOnly
	if keep {
		v.reachable[k] = true
	}
	v.mu.Unlock()
	if keep {
		v.views.grow(v, int64(len(k)))
	}
	f.land(refsOnly, err)
	return err
}

// nonTips returns the object ids that are not served tips of v's state,
// each once.
func (v *refsView) nonTips(oids []string) []string {
	var out []string
	var seen map[string]bool // made once a want is not a tip: most are
	for _, oid := range oids {
		if v.tips[oid] || seen[oid] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[oid] = true
		out = append(out, oid)
	}
	return out
}

// allTips says whether every want is a served tip of v's state.
func (v *refsView) allTips(wants []string) bool {
	for _, w := range wants {
		if !v.tips[w] {
			return false
		}
	}
	return true
}

// damagedTip tells the failure of a run whose wants were all served tips
// of v's state for what it is when upload-pack answered "not our ref": it
// could not read a tip's object, which the refs still name, so the mirror
// is damaged (a truncated pack, an emptied object file), a failure the
// node must hear of to repair it, not a want to refuse. The refs are read
// again first: a tip that a force-push and a prune took away meanwhile is
// not damage. Any other failure is returned as it is.
func damagedTip(err error, v *refsView, wants []string) error {
	var ge *gitcmd.Error
	if err == nil || !errors.As(err, &ge) || !strings.Contains(ge.Stderr, "not our ref") || !v.allTips(wants) {
		return err
	}
	if now, rerr := readRefs(v.dir); rerr != nil || !bytes.Equal(now.digest, v.state) {
		return err
	}
	d := *ge
	d.Class = gitcmd.ClassBadObjects
	d.Stderr = "a served ref's tip cannot be read: the mirror is damaged: " + ge.Stderr
	return &d
}

// wantsKey names a set of wanted objects, whatever their order.
func wantsKey(wants []string) string {
	sorted := slices.Clone(wants)
	slices.Sort(sorted)
	h := sha256.New()
	for _, w := range slices.Compact(sorted) {
		h.Write([]byte(w))
	}
	return string(h.Sum(nil))
}

// objectTypes tells each object's type ("missing" for one not on disk),
// from one git cat-file.
func objectTypes(ctx context.Context, git *gitcmd.Runner, dir string, oids []string, each func(oid, typ string)) error {
	in := strings.Join(oids, "\n") + "\n"
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "cat-file",
		Flags: []string{"--batch-check=%(objectname) %(objecttype)"}, Stdin: strings.NewReader(in)})
	if err != nil {
		return fmt.Errorf("listing the wanted objects: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		oid, typ, _ := strings.Cut(sc.Text(), " ")
		each(oid, typ)
	}
	return nil
}

// checkWants refuses a request for objects that the served refs do not
// reach. Git's upload-pack serves more: protocol v2's any object it has,
// and v0's stateless one any tree or blob (its own reachability check
// walks commits only), so that what an upstream force-pushed away (a
// leaked secret, say) could otherwise be fetched by its id until the
// prune drops it from disk, and a pool member would serve every other
// member's objects. This is what git's uploadpack.allowReachableSHA1InWant
// means, held for every type of object and both protocols.
//
// Commits must be reachable from a ref (a ref's tip is, at no cost), or
// be a tip that the repository advertised a moment ago (recent, when not
// nil: see recentTips). Tags, trees and blobs (a partial clone asks for
// blobs by id) must be reached by the refs too (objectsReached); a tag
// that was advertised a moment ago is served as a commit is. refsOnly
// says that the answer depends on the refs alone: every want is an
// object that they were found to reach.
func checkWants(ctx context.Context, git *gitcmd.Runner, dir string, wants []string, recent func(oid string) bool) (refsOnly bool, err error) {
	var commits bytes.Buffer
	var objects []string // checked by an object walk
	refsOnly = true
	missingOID := ""
	err = objectTypes(ctx, git, dir, wants, func(oid, typ string) {
		switch typ {
		case "commit", "tag":
			if recent != nil && recent(oid) {
				refsOnly = false
				return // on disk, and advertised within the grace
			}
			if typ == "tag" {
				// A tag may peel to a commit that the refs reach: the
				// tag itself must be.
				objects = append(objects, oid)
				return
			}
			commits.WriteString(oid + "\n")
		case "tree", "blob":
			objects = append(objects, oid)
		default: // "missing"
			if missingOID == "" {
				missingOID = oid
			}
		}
	})
	if err != nil {
		return false, err
	}
	if missingOID != "" {
		return false, missing(ctx, git, dir, missingOID)
	}
	if len(objects) > 0 {
		if err := objectsReached(ctx, git, dir, objects); err != nil {
			return false, err
		}
	}
	if commits.Len() == 0 {
		return refsOnly, nil
	}
	// What the wanted commits reach that no ref reaches; nothing when
	// every one is reachable (a ref's tip stops the walk at once).
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "rev-list",
		Flags: []string{"--max-count=1", "--not", "--exclude=" + hiddenRefs + "*", "--all", "--not", "--stdin"}, Stdin: &commits})
	if err != nil {
		return false, fmt.Errorf("checking that the wanted commits are served: %w", err)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return false, refused("not our ref %s: only what the served refs reach is served", truncate(string(bytes.TrimSpace(out))))
	}
	return refsOnly, nil
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

// objectsReached refuses the wanted objects (trees, blobs, tags) that the
// served refs do not reach, exactly: a client that knows the id of a file
// that a force-push took away, or of another fork's file that a pool
// member borrows, must not fetch it.
//
// A first rev-list asks for the wanted objects that the refs do not reach
// (the wants, --not the refs). With a bitmap that covers the refs (a
// mirror's own, or the pool's, which a member reads) that answer is exact and quick, and the
// common case ends there. Without one, rev-list's walk marks only part of
// what the refs reach (the trees of the commits at its boundary), so what
// it lists may still be reachable: those wants are looked for in a listing
// of every object the refs reach (with the bitmap where git can use it),
// read until each was seen, and refused if it ends first.
func objectsReached(ctx context.Context, git *gitcmd.Runner, dir string, oids []string) error {
	wanted := make(map[string]bool, len(oids))
	for _, oid := range oids {
		wanted[oid] = true
	}
	// Nothing that the first rev-list leaves out needs another look: it
	// lists every want that it did not mark reached.
	unmarked := map[string]bool{}
	err := listObjects(ctx, git, gitcmd.Cmd{GitDir: dir, Name: "rev-list",
		Flags: []string{"--objects", "--use-bitmap-index", "--not", "--exclude=" + hiddenRefs + "*", "--all", "--not", "--stdin"},
		Stdin: strings.NewReader(strings.Join(oids, "\n") + "\n")}, func(oid string) bool {
		if wanted[oid] {
			unmarked[oid] = true
		}
		return len(unmarked) == len(wanted)
	})
	if err != nil {
		return fmt.Errorf("checking that the wanted objects are served: %w", err)
	}
	if len(unmarked) == 0 {
		return nil
	}
	err = listObjects(ctx, git, gitcmd.Cmd{GitDir: dir, Name: "rev-list",
		Flags: []string{"--objects", "--use-bitmap-index", "--exclude=" + hiddenRefs + "*", "--all"}}, func(oid string) bool {
		delete(unmarked, oid)
		return len(unmarked) == 0
	})
	if err != nil {
		return fmt.Errorf("listing what the served refs reach: %w", err)
	}
	for _, oid := range oids { // the first in the request's order
		if unmarked[oid] {
			return refused("not our ref %s: only what the served refs reach is served", truncate(oid))
		}
	}
	return nil
}

// listObjects runs a rev-list --objects and hands each listed object id to
// each, until each says that it needs no more: the listing is then cut
// short.
func listObjects(ctx context.Context, git *gitcmd.Runner, c gitcmd.Cmd, each func(oid string) (enough bool)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := &lineWriter{each: func(line []byte) bool {
		oid, _, _ := bytes.Cut(line, []byte(" "))
		return each(string(oid))
	}, stop: cancel}
	c.Stdout = lw
	err := git.Run(ctx, c)
	if lw.stopped {
		return nil
	}
	return err
}

// lineWriter hands each whole line written to it to each, until each says
// stop: it then calls stop (which ends the process that writes) and fails
// the writes.
type lineWriter struct {
	each    func(line []byte) (stop bool)
	stop    func()
	stopped bool
	part    []byte // a line not yet ended
}

var errEnough = errors.New("the listing was read far enough")

func (l *lineWriter) Write(p []byte) (int, error) {
	if l.stopped {
		return 0, errEnough
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.part = append(l.part, p...)
			break
		}
		line := p[:i]
		if len(l.part) > 0 {
			line = append(l.part, line...)
			l.part = l.part[:0]
		}
		p = p[i+1:]
		if l.each(line) {
			l.stopped = true
			l.stop()
			return n, errEnough
		}
	}
	return n, nil
}

// deepenNotServed refuses a request whose deepen-not lines do not each
// name exactly one served ref: upload-pack dies on such a line, in
// protocol v2 after its answer began. A name is looked up as upload-pack
// looks it up (git's expand_ref): as it is when it is HEAD or begins with
// refs/, then under refs/, refs/tags/, refs/heads/, refs/remotes/, and as
// refs/remotes/<name>/HEAD. One for-each-ref lists what exists of them.
func deepenNotServed(ctx context.Context, git *gitcmd.Runner, dir string, names []string) error {
	var patterns []string
	for _, n := range names {
		patterns = append(patterns, refCandidates(n)...)
	}
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: dir, Name: "for-each-ref", Flags: []string{"--format=%(refname)"}, Args: patterns})
	if err != nil {
		return fmt.Errorf("looking up the refs of deepen-not lines: %w", err)
	}
	exists := map[string]bool{"HEAD": true}
	for line := range strings.Lines(string(out)) {
		if name := strings.TrimSpace(line); !unadvertised(name) {
			exists[name] = true // for-each-ref also lists refs below a pattern: only exact names count
		}
	}
	for _, n := range names {
		found := 0
		for _, c := range refCandidates(n) {
			if exists[c] {
				found++
			}
		}
		if found != 1 {
			return malformed("deepen-not %q names no served ref, or several", truncate(n))
		}
	}
	return nil
}

// refCandidates are the refs that a deepen-not name may mean.
func refCandidates(name string) []string {
	out := []string{"refs/" + name, "refs/tags/" + name, "refs/heads/" + name, "refs/remotes/" + name, "refs/remotes/" + name + "/HEAD"}
	if name == "HEAD" || strings.HasPrefix(name, "refs/") {
		out = append(out, name) // the name as it is
	}
	return out
}
