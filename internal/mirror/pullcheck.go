package mirror

import (
	"fmt"
	"sort"
	"strings"
)

// RefChange is one branch or tag that a pull would change: Old is "" for a
// new ref, New is "" for a deleted one.
type RefChange struct {
	Ref, Old, New string
}

// Mismatch is a change that the upstream does not show: the source served
// Tip for Ref ("" for a deletion), the upstream has Upstream ("" when it
// lacks Ref).
type Mismatch struct {
	Ref, Tip, Upstream string
}

// MismatchError is the answer of a verified pull when the source served
// refs that the upstream does not show. Nothing of the pull was applied.
type MismatchError struct {
	Key        string
	Mismatches []Mismatch
}

func (e *MismatchError) Error() string {
	refs := make([]string, 0, len(e.Mismatches))
	for _, m := range e.Mismatches {
		refs = append(refs, m.Ref)
	}
	return fmt.Sprintf("mirror %s: the source's refs differ from the upstream's (%s); nothing applied", e.Key, strings.Join(refs, ", "))
}

// maxNamedRefs is the most changed refs asked of the upstream by name;
// above it (and on a first pull) the upstream lists all its branches and
// tags in one request.
const maxNamedRefs = 64

// changes lists, sorted by ref, what turning before into after changes.
func changes(before, after map[string]string) []RefChange {
	var out []RefChange
	for ref, oid := range after {
		if old := before[ref]; old != oid {
			out = append(out, RefChange{Ref: ref, Old: old, New: oid})
		}
	}
	for ref, old := range before {
		if _, ok := after[ref]; !ok {
			out = append(out, RefChange{Ref: ref, Old: old})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out
}

// upstreamQuery is the ref names to ask the upstream about for cs: the
// changed refs by name, or nil (every branch and tag) when there are many
// or when first is set.
func upstreamQuery(cs []RefChange, first bool) []string {
	if first || len(cs) > maxNamedRefs {
		return nil
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Ref
	}
	return names
}

// verify checks each change against the upstream's refs: a change of R is
// accepted only when the upstream shows R at the new object, a deletion only
// when the upstream lacks R. With exact set, the source must also have every
// ref the upstream has (a first pull: the source may not leave any out).
func verify(cs []RefChange, upstream map[string]string, exact bool, source map[string]string) []Mismatch {
	var bad []Mismatch
	for _, c := range cs {
		if up := upstream[c.Ref]; up != c.New {
			bad = append(bad, Mismatch{Ref: c.Ref, Tip: c.New, Upstream: up})
		}
	}
	if exact {
		for ref, oid := range upstream {
			if _, ok := source[ref]; !ok {
				bad = append(bad, Mismatch{Ref: ref, Upstream: oid})
			}
		}
		sort.Slice(bad, func(i, j int) bool { return bad[i].Ref < bad[j].Ref })
	}
	return bad
}

// updateRefScript is the stdin of one `git update-ref --stdin` transaction
// applying cs, each old value checked.
func updateRefScript(cs []RefChange) string {
	var b strings.Builder
	for _, c := range cs {
		switch {
		case c.New == "":
			fmt.Fprintf(&b, "delete %s %s\n", c.Ref, c.Old)
		case c.Old == "":
			fmt.Fprintf(&b, "create %s %s\n", c.Ref, c.New)
		default:
			fmt.Fprintf(&b, "update %s %s %s\n", c.Ref, c.New, c.Old)
		}
	}
	return b.String()
}
