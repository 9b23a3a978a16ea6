package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// RefLimits bound what an upstream's ref listing may make gitfleet hold.
type RefLimits struct {
	// MaxRefs is the most branches and tags a repository may have; a
	// listing with more is refused (ClassTooManyRefs). 0: no limit.
	MaxRefs int
	// MaxRefLength is the longest ref name kept, in bytes; longer names are
	// skipped. 0: no limit (names are still skipped when no file system
	// could store them).
	MaxRefLength int
	// CaseInsensitiveFS says the mirrors live on a file system that folds
	// case (macOS, Windows), where refs/heads/Master and refs/heads/master
	// would be one file: of two names that differ only in case, the second
	// advertised is skipped.
	CaseInsensitiveFS bool
}

// maxComponent is the longest ref name component gitfleet stores: git
// writes a ref as a file "<component>.lock" first, and common file systems
// allow 255 bytes in a name.
const maxComponent = 250

// maxSkippedBytes bounds the names of skipped refs that a listing keeps
// (they become negative refspecs): an upstream advertising more is refused.
const maxSkippedBytes = 4 << 20

// maxLine bounds one line of ls-remote's output: a pkt-line carries at
// most 65516 bytes, so no real ref is longer.
const maxLine = 64 << 10

// CheckRefName says why name is not a ref that gitfleet stores under lim
// ("" when it is): longer than lim.MaxRefLength, holding a control
// character, or with a component longer than a file name may be.
func CheckRefName(name string, lim RefLimits) string {
	if lim.MaxRefLength > 0 && len(name) > lim.MaxRefLength {
		return fmt.Sprintf("longer than %d bytes", lim.MaxRefLength)
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] == 0x7f {
			return "control character"
		}
	}
	for _, c := range strings.Split(name, "/") {
		if len(c) > maxComponent {
			return fmt.Sprintf("a component longer than %d bytes", maxComponent)
		}
	}
	return ""
}

// Listing is what ListRefs found: the branches and tags kept, and the
// names it skipped.
type Listing struct {
	Refs
	// Skipped are the names of advertised branches and tags that
	// CheckRefName refused, in the upstream's order.
	Skipped []string
}

// ListRefs asks url for its branches and tags only (protocol v2 sends the
// server ref prefixes, so other refs never cross the network), under lim:
// the output is read as it streams, and git is stopped as soon as the
// count passes lim.MaxRefs, with an *Error of ClassTooManyRefs. HEAD is not
// listed (see RemoteHead).
func (r *Runner) ListRefs(ctx context.Context, url string, lim RefLimits) (Listing, error) {
	return r.list(ctx, Cmd{Name: "ls-remote", Flags: []string{"--heads", "--tags"}, Args: []string{url}}, &refParser{lim: lim})
}

// ListRefsAndHead is ListRefs in the one listing a first mirror makes
// (`ls-remote --symref`): the branches and tags with the branch HEAD
// points to (Head). As its names are then fetched by exact refspecs, in
// which one name git would not write as a ref fails the whole fetch, such
// names are skipped too.
func (r *Runner) ListRefsAndHead(ctx context.Context, url string, lim RefLimits) (Listing, error) {
	return r.list(ctx, Cmd{Name: "ls-remote", Flags: []string{"--symref"}, Args: []string{url}}, &refParser{lim: lim, exact: true})
}

// ListPeerRefsAndHead is ListRefsAndHead of a gitfleet peer on this
// machine (Cmd.Peer: url is an http URL on a loopback address), with extra
// environment: the credentials of the local proxy, which stay off the
// command line.
func (r *Runner) ListPeerRefsAndHead(ctx context.Context, url string, env []string, lim RefLimits) (Listing, error) {
	return r.list(ctx, Cmd{Name: "ls-remote", Flags: []string{"--symref"}, Args: []string{url}, Env: env, Peer: true},
		&refParser{lim: lim, exact: true})
}

// list runs the listing cmd with p reading its output as it streams.
func (r *Runner) list(ctx context.Context, cmd Cmd, p *refParser) (Listing, error) {
	p.out = Listing{Refs: Refs{Refs: make(map[string]string)}}
	cmd.Stdout = p
	err := r.Run(ctx, cmd)
	if p.err != nil {
		return Listing{}, p.err
	}
	if err != nil {
		return Listing{}, err
	}
	p.flush()
	if p.err != nil {
		return Listing{}, p.err
	}
	return p.out, nil
}

// RemoteHead asks url for the branch its HEAD points to ("" when none).
func (r *Runner) RemoteHead(ctx context.Context, url string) (string, error) {
	out, err := r.Output(ctx, Cmd{Name: "ls-remote", Flags: []string{"--symref"}, Args: []string{url, "HEAD"}})
	if err != nil {
		return "", err
	}
	return parseLsRemote(out).Head, nil
}

// errStop makes git's stdout copy stop: the listing already failed.
var errStop = errors.New("gitcmd: listing refused")

// refParser reads ls-remote's output as it is written.
type refParser struct {
	lim RefLimits
	// exact: the names kept are fetched by exact refspecs, so those git
	// would not write as refs are skipped (see ListRefsAndHead).
	exact    bool
	out      Listing
	count    int
	skipped  int // bytes of skipped names
	line     []byte
	overlong bool            // the current line passed maxLine: dropped
	folded   map[string]bool // lower-cased names kept, with CaseInsensitiveFS
	err      error
}

func (p *refParser) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, errStop
	}
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if !p.overlong {
			if len(p.line)+len(chunk) > maxLine {
				p.overlong, p.line = true, p.line[:0]
			} else {
				p.line = append(p.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		p.flush()
		if p.err != nil {
			return 0, errStop
		}
		b = b[i+1:]
	}
	return n, nil
}

// flush parses the line read so far.
func (p *refParser) flush() {
	line := string(p.line)
	overlong := p.overlong
	p.line, p.overlong = p.line[:0], false
	if overlong {
		// Not a ref git could have sent: count it, the fetch will say more.
		p.add()
		return
	}
	oid, name, ok := strings.Cut(line, "\t")
	if !ok {
		return
	}
	if target, sym := strings.CutPrefix(oid, "ref: "); sym { // --symref
		if name == "HEAD" {
			p.out.Head = target
		}
		return
	}
	if !isOID(oid) || !mirrored(name) || strings.HasSuffix(name, "^{}") {
		return
	}
	if !p.add() {
		return
	}
	why := CheckRefName(name, p.lim)
	if why == "" && p.exact && !writableRef(name) {
		why = "not a name git writes as a ref"
	}
	if why == "" && p.lim.CaseInsensitiveFS {
		low := strings.ToLower(name)
		if p.folded[low] {
			why = "differs only in case from another ref"
		} else {
			if p.folded == nil {
				p.folded = make(map[string]bool)
			}
			p.folded[low] = true
		}
	}
	if why != "" {
		p.out.Skipped = append(p.out.Skipped, name)
		p.skipped += len(name)
		if p.skipped > maxSkippedBytes {
			p.err = &Error{Args: []string{"ls-remote"}, ExitCode: -1, Class: ClassTooManyRefs,
				Stderr: fmt.Sprintf("more than %d bytes of ref names that cannot be mirrored", maxSkippedBytes)}
		}
		return
	}
	p.out.Refs.Refs[name] = oid
}

// add counts one advertised branch or tag; false once over the limit.
func (p *refParser) add() bool {
	p.count++
	if p.lim.MaxRefs > 0 && p.count > p.lim.MaxRefs {
		p.err = &Error{Args: []string{"ls-remote"}, ExitCode: -1, Class: ClassTooManyRefs,
			Stderr: fmt.Sprintf("the upstream has more than %d branches and tags (--max-refs)", p.lim.MaxRefs)}
		return false
	}
	return true
}

// writableRef tells whether git writes name as a ref (git
// check-ref-format's rules, for a name under refs/).
func writableRef(name string) bool {
	if strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") ||
		strings.ContainsAny(name, " ~^:?*[\\") {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] == 0x7f {
			return false
		}
	}
	for _, c := range strings.Split(name, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	return true
}

// NegativeRefspec is the refspec that keeps name out of a fetch, and false
// when name cannot be written as one (such a name is not a valid ref, and
// git refuses it by itself).
func NegativeRefspec(name string) (string, bool) {
	if strings.ContainsAny(name, "*?[\\: ~^") {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] == 0x7f {
			return "", false
		}
	}
	return "^" + name, true
}
