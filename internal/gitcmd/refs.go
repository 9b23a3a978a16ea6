package gitcmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MirroredRefs are the namespaces gitfleet mirrors: branches and tags. Pull
// request and other host-private refs are left out on purpose: they dwarf
// the rest on busy repositories and nobody clones them from a mirror.
var MirroredRefs = []string{"refs/heads/", "refs/tags/"}

// FetchRefspecs mirror MirroredRefs exactly (forced, so that a force-pushed
// upstream is followed, and pruned by fetch --prune).
var FetchRefspecs = []string{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

// Refs maps full ref names to object IDs. Head is the symbolic target of HEAD
// ("refs/heads/main"), when known.
type Refs struct {
	Refs map[string]string
	Head string
	// Times are the committer times (unix seconds) of the commits that
	// branches point to; only LocalRefs fills them.
	Times map[string]int64
	// Parents are the parents (space-separated IDs) of the commits that
	// refs point to, so that a fast-forward by one commit is seen without
	// asking git; only LocalRefs fills them.
	Parents map[string]string
}

// ParentOf reports whether the commit that ref points to has old as a
// parent, by what LocalRefs read (false when it is not known).
func (r Refs) ParentOf(ref, old string) bool {
	for _, p := range strings.Fields(r.Parents[ref]) {
		if p == old {
			return true
		}
	}
	return false
}

// Digest is a short, stable fingerprint of the refs (not of HEAD): two
// repositories with the same branches and tags at the same objects have the
// same digest. An empty set has digest "".
// ParseDigest turns a digest as Digest writes it (32 lower-case hex
// digits) into its 16 bytes; ok is false for anything else.
func ParseDigest(d string) (b [16]byte, ok bool) {
	if len(d) != 2*len(b) || strings.ToLower(d) != d {
		return b, false
	}
	if _, err := hex.Decode(b[:], []byte(d)); err != nil {
		return [16]byte{}, false
	}
	return b, true
}

func (r Refs) Digest() string {
	if len(r.Refs) == 0 {
		return ""
	}
	names := make([]string, 0, len(r.Refs))
	for n := range r.Refs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %s\n", r.Refs[n], n)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func mirrored(name string) bool {
	for _, p := range MirroredRefs {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// LsRemote asks url for its refs (protocol v2 ls-refs where the server
// speaks it) without fetching anything.
func (r *Runner) LsRemote(ctx context.Context, url string) (Refs, error) {
	out, err := r.Output(ctx, Cmd{Name: "ls-remote", Flags: []string{"--symref"}, Args: []string{url}})
	if err != nil {
		return Refs{}, err
	}
	return parseLsRemote(out), nil
}

func parseLsRemote(out []byte) Refs {
	refs := Refs{Refs: make(map[string]string)}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		left, name, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		if target, isSym := strings.CutPrefix(left, "ref: "); isSym {
			if name == "HEAD" {
				refs.Head = target
			}
			continue
		}
		if mirrored(name) && !strings.HasSuffix(name, "^{}") && isOID(left) {
			refs.Refs[name] = left
		}
	}
	return refs
}

// LocalRefs reads the mirrored refs and HEAD of the bare repository at dir.
func (r *Runner) LocalRefs(ctx context.Context, dir string) (Refs, error) {
	out, err := r.Output(ctx, Cmd{GitDir: dir, Name: "for-each-ref",
		Flags: []string{"--format=%(objectname) %(committerdate:unix) %(refname) %(parent)"}, Args: []string{"refs/heads/", "refs/tags/"}})
	if err != nil {
		return Refs{}, err
	}
	refs := Refs{Refs: make(map[string]string), Times: make(map[string]int64), Parents: make(map[string]string)}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(line, " ", 4) // ref names hold no spaces
		if len(f) != 4 || !isOID(f[0]) {
			continue
		}
		refs.Refs[f[2]] = f[0]
		if t, err := strconv.ParseInt(f[1], 10, 64); err == nil && t > 0 {
			refs.Times[f[2]] = t
		}
		if f[3] != "" {
			refs.Parents[f[2]] = f[3]
		}
	}
	if head, err := readHead(dir); err == nil { // HEAD's file, without a process
		refs.Head = head
		return refs, nil
	}
	head, err := r.Output(ctx, Cmd{GitDir: dir, Name: "symbolic-ref", Flags: []string{"-q"}, Args: []string{"HEAD"}})
	if err == nil {
		refs.Head = strings.TrimSpace(string(head))
	}
	return refs, nil
}

func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// IsOID reports whether s is a full hexadecimal object ID (SHA-1 or SHA-256).
func IsOID(s string) bool { return isOID(s) }
