package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// soakRepo is one upstream repository of the soak and the record of every
// value each of its refs ever had, which the checks hold the full node to.
type soakRepo struct {
	name string
	dir  string

	op sync.Mutex // one push (or disappearance) at a time

	mu   sync.Mutex
	refs map[string]string   // the refs now
	hist map[string][]string // every value each ref was ever given, oldest first
	away bool                // the repository's directory is moved aside: the server answers 404
	n    int                 // refs made so far, for new names
}

// soakUpstreams is the soak's upstream git server and its repositories.
type soakUpstreams struct {
	dir   string // the bare repositories, served by plainGitServer
	link  *link  // every node's path to the upstreams ends through it
	host  string // host:port of the upstreams in their URLs (soakUpstreamHost)
	repos []*soakRepo

	mu     sync.Mutex
	pushes map[string]int // by kind
}

func soakName(i int) string { return fmt.Sprintf("soak/r%04d", i) }

// url is the upstream URL the fleet is given for repository i (each node
// resolves its host to its own link); key is the repository's key in
// gitfleet.
func (u *soakUpstreams) url(i int) string {
	return "http://" + u.host + "/" + soakName(i) + ".git"
}
func (u *soakUpstreams) key(i int) string { return u.host + "/" + soakName(i) }

// soakFork tells whether repository i is one of the forks of the soak's
// fork network: they share their first commit (one root), and each has a
// commit of its own on top. The full node's roots make them one network;
// soakForkDeclared ones declare it in the catalog too (network:
// soakNetwork).
func soakFork(i int) bool { return i%20 == 3 }

func soakForkDeclared(i int) bool { return soakFork(i) && i%40 == 3 }

// soakNetwork is the network the declared forks name.
const soakNetwork = "soaknet"

// soakBlobEvery: one repository in so many carries a blob of a few KiB
// that compresses badly (soakBlobRepo), for the bit-rot fault to rot.
const soakBlobEvery = 10

// soakBlobRepo is the n-th repository that carries a blob to rot; never a
// fork (soakFork).
func soakBlobRepo(n int) int { return n*soakBlobEvery + 5 }

// createSoakRepo makes a bare repository with a main branch and a v1 tag in
// one git fast-import; every soakBlobEvery-th also a file of 4 KiB of
// seeded random bytes.
func createSoakRepo(root string, i int) (*soakRepo, error) {
	r := &soakRepo{name: soakName(i), dir: filepath.Join(root, soakName(i)+".git"), refs: map[string]string{}, hist: map[string][]string{}}
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", r.dir); err != nil {
		return nil, err
	}
	content := fmt.Sprintf("soak repository %d\n", i)
	if soakFork(i) {
		content = "the soak's fork network\n" // the same first commit in every fork
	}
	blob := ""
	if i%soakBlobEvery == soakBlobRepo(0) {
		noise := make([]byte, 4096)
		var seed [32]byte
		seed[0], seed[1] = byte(i), byte(i>>8)
		_, _ = rand.NewChaCha8(seed).Read(noise)
		blob = fmt.Sprintf("M 100644 inline NOISE\ndata %d\n%s\n", len(noise), noise)
	}
	stream := fmt.Sprintf("blob\nmark :1\ndata %d\n%s\ncommit refs/heads/main\nmark :2\ncommitter soak <soak@gitfleet.invalid> 1700000000 +0000\ndata 5\nstart\nM 100644 :1 README\n%s\nreset refs/tags/v1\nfrom :2\n\n",
		len(content), content, blob)
	if soakFork(i) {
		own := fmt.Sprintf("fork %d\n", i)
		stream += fmt.Sprintf("commit refs/heads/main\ncommitter soak <soak@gitfleet.invalid> 1700000001 +0000\ndata 4\nown\nfrom :2\nM 100644 inline OWN\ndata %d\n%s\n",
			len(own), own)
	}
	cmd := exec.Command("git", "--git-dir", r.dir, "fast-import", "--quiet")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fast-import %s: %w: %s", r.name, err, out)
	}
	refs, err := gittest.RefsOf(r.dir)
	if err != nil {
		return nil, err
	}
	for ref, oid := range refs {
		r.refs[ref] = oid
		r.hist[ref] = []string{oid}
	}
	return r, nil
}

func (r *soakRepo) git(args ...string) (string, error) {
	out, err := gittest.Output("", append([]string{"--git-dir", r.dir}, args...)...)
	return strings.TrimSpace(out), err
}

// record adds a value to ref's history before the upstream shows it, so
// that a check never sees a value the record lacks.
func (r *soakRepo) record(ref, oid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist[ref] = append(r.hist[ref], oid)
}

func (r *soakRepo) set(ref, oid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if oid == "" {
		delete(r.refs, ref)
	} else {
		r.refs[ref] = oid
	}
}

// position is the index of the latest time ref was given oid, or -1 if it
// never was.
func (r *soakRepo) position(ref, oid string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hist[ref]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] == oid {
			return i
		}
	}
	return -1
}

// current is a copy of the refs now, or nil while the repository is away.
func (r *soakRepo) current() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.away {
		return nil
	}
	out := make(map[string]string, len(r.refs))
	for k, v := range r.refs {
		out[k] = v
	}
	return out
}

// push makes one change of a kind drawn from rng, as a developer's push
// would: a fast-forward most often, sometimes a force-push (back to an
// older value, or to an unrelated history), a new or deleted branch or
// tag. It returns the kind, or "" when the repository is away.
func (r *soakRepo) push(rng *rand.Rand) (string, error) {
	r.op.Lock()
	defer r.op.Unlock()
	cur := r.current()
	if cur == nil {
		return "", nil
	}
	var branches, tags []string
	for ref := range cur {
		if ref != "refs/heads/main" && strings.HasPrefix(ref, "refs/heads/") {
			branches = append(branches, ref)
		} else if strings.HasPrefix(ref, "refs/tags/") {
			tags = append(tags, ref)
		}
	}
	slices.Sort(branches)
	slices.Sort(tags)
	r.n++
	msg := fmt.Sprintf("%s change %d", r.name, r.n)
	kind := "fast-forward"
	switch p := rng.IntN(100); {
	case p < 10:
		kind = "force-push"
	case p < 20:
		kind = "new-branch"
	case p < 28:
		kind = "new-tag"
	case p < 34:
		kind = "delete-branch"
	case p < 40:
		kind = "delete-tag"
	}
	if len(branches)+len(tags) > 6 && (kind == "new-branch" || kind == "new-tag") {
		kind = "delete-" + strings.TrimPrefix(kind, "new-")
	}
	if kind == "delete-branch" && len(branches) == 0 || kind == "delete-tag" && len(tags) == 0 {
		kind = "fast-forward"
	}
	switch kind {
	case "fast-forward":
		ref := "refs/heads/main"
		if len(branches) > 0 && rng.IntN(3) == 0 {
			ref = branches[rng.IntN(len(branches))]
		}
		old := cur[ref]
		oid, err := r.git("commit-tree", "-p", old, "-m", msg, old+"^{tree}")
		if err != nil {
			return kind, err
		}
		return kind, r.update(ref, oid, old)
	case "force-push":
		ref, old := "refs/heads/main", cur["refs/heads/main"]
		h := r.history(ref)
		var oid string
		if back := h[:len(h)-1]; len(back) > 0 && rng.IntN(2) == 0 && back[len(back)-1] != old {
			oid = back[rng.IntN(len(back))] // backwards, to a value it had
		}
		if oid == "" || oid == old {
			var err error
			if oid, err = r.git("commit-tree", "-m", msg, old+"^{tree}"); err != nil { // an unrelated history
				return kind, err
			}
		}
		return kind, r.update(ref, oid, old)
	case "new-branch", "new-tag":
		ref := fmt.Sprintf("refs/heads/b%d", r.n)
		if kind == "new-tag" {
			ref = fmt.Sprintf("refs/tags/t%d", r.n)
		}
		main := cur["refs/heads/main"]
		oid, err := r.git("commit-tree", "-p", main, "-m", msg, main+"^{tree}")
		if err != nil {
			return kind, err
		}
		return kind, r.update(ref, oid, "")
	default: // delete-branch, delete-tag
		pool := branches
		if kind == "delete-tag" {
			pool = tags
		}
		ref := pool[rng.IntN(len(pool))]
		if _, err := r.git("update-ref", "-d", ref, cur[ref]); err != nil {
			return kind, err
		}
		r.set(ref, "")
		return kind, nil
	}
}

func (r *soakRepo) history(ref string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hist[ref])
}

// update moves ref from old ("" for a new ref) to oid in the upstream,
// recording oid first.
func (r *soakRepo) update(ref, oid, old string) error {
	r.record(ref, oid)
	args := []string{"update-ref", ref, oid}
	if old != "" {
		args = append(args, old)
	}
	if _, err := r.git(args...); err != nil {
		return err
	}
	r.set(ref, oid)
	return nil
}

// goAway moves the repository aside so that the server answers 404 for it;
// comeBack restores it.
func (r *soakRepo) goAway() error {
	r.op.Lock()
	defer r.op.Unlock()
	if err := os.Rename(r.dir, r.dir+".away"); err != nil {
		return err
	}
	r.mu.Lock()
	r.away = true
	r.mu.Unlock()
	return nil
}

func (r *soakRepo) comeBack() error {
	r.op.Lock()
	defer r.op.Unlock()
	if err := os.Rename(r.dir+".away", r.dir); err != nil {
		return err
	}
	r.mu.Lock()
	r.away = false
	r.mu.Unlock()
	return nil
}

func (u *soakUpstreams) countPush(kind string) {
	u.mu.Lock()
	u.pushes[kind]++
	u.mu.Unlock()
}
