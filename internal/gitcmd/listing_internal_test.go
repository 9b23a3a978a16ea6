package gitcmd

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const (
	oidA = "1111111111111111111111111111111111111111"
	oidB = "2222222222222222222222222222222222222222"
)

// parse feeds out, the output of `ls-remote --symref` (ListRefsAndHead),
// to its parser in chunks of n bytes, as git's stdout arrives.
func parse(lim RefLimits, out string, n int) (Listing, error) {
	p := &refParser{lim: lim, exact: true, out: Listing{Refs: Refs{Refs: map[string]string{}}}}
	for len(out) > 0 {
		c := min(n, len(out))
		if _, err := p.Write([]byte(out[:c])); err != nil {
			return Listing{}, p.err
		}
		out = out[c:]
	}
	if p.flush(); p.err != nil {
		return Listing{}, p.err
	}
	return p.out, nil
}

func TestTheFirstListingKeepsBranchesTagsAndHead(t *testing.T) {
	out := "ref: refs/heads/main\tHEAD\n" +
		oidA + "\tHEAD\n" +
		oidA + "\trefs/heads/main\n" +
		"ref: refs/heads/main\trefs/heads/alias\n" +
		oidA + "\trefs/heads/alias\n" +
		oidB + "\trefs/tags/v1\n" +
		oidA + "\trefs/tags/v1^{}\n" +
		oidB + "\trefs/pull/1/head\n" +
		oidB + "\trefs/changes/01/1/1\n"
	want := Listing{Refs: Refs{Head: "refs/heads/main", Refs: map[string]string{
		"refs/heads/main": oidA, "refs/heads/alias": oidA, "refs/tags/v1": oidB}}}
	for _, n := range []int{1, 7, len(out)} {
		got, err := parse(RefLimits{MaxRefs: 3}, out, n)
		if err != nil {
			t.Fatalf("chunks of %d: %v", n, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks of %d: %+v, want %+v", n, got, want)
		}
	}
}

func TestTheFirstListingStopsPastMaxRefs(t *testing.T) {
	var b strings.Builder
	for i := range 5 {
		b.WriteString(oidA + "\trefs/heads/b" + string(rune('a'+i)) + "\n")
	}
	// Refs that are not mirrored are not counted.
	b.WriteString(oidA + "\trefs/pull/1/head\n" + oidA + "\trefs/pull/2/head\n")
	if _, err := parse(RefLimits{MaxRefs: 5}, b.String(), 3); err != nil {
		t.Fatalf("5 branches under MaxRefs 5: %v", err)
	}
	_, err := parse(RefLimits{MaxRefs: 4}, b.String(), 3)
	var ge *Error
	if !errors.As(err, &ge) || ge.Class != ClassTooManyRefs {
		t.Fatalf("5 branches over MaxRefs 4: %v, want %s", err, ClassTooManyRefs)
	}
}

func TestTheFirstListingSkipsRefsItCannotMirror(t *testing.T) {
	long := "refs/heads/" + strings.Repeat("x", 300)
	skip := []string{
		long,                  // a component no file system stores
		"refs/heads/bell\x07", // a control character
		"refs/heads/a..b",     // git writes none of these
		"refs/heads/a b",
		"refs/heads/x.lock",
		"refs/heads/.hidden",
		"refs/heads/end.",
		"refs/heads/at@{1}",
		"refs/heads/Main",                      // folds onto refs/heads/main, listed first
		"refs/tags/" + strings.Repeat("t", 40), // over MaxRefLength
	}
	var b strings.Builder
	b.WriteString(oidA + "\trefs/heads/main\n")
	for _, n := range skip {
		b.WriteString(oidB + "\t" + n + "\n")
	}
	b.WriteString(oidB + "\t" + "refs/heads/ok/fine-1.2\n")
	got, err := parse(RefLimits{MaxRefLength: 300, CaseInsensitiveFS: true}, b.String(), 64)
	if err != nil {
		t.Fatal(err)
	}
	// The tag is under 300 bytes: kept when the limit is not lower.
	tag := "refs/tags/" + strings.Repeat("t", 40)
	want := map[string]string{"refs/heads/main": oidA, "refs/heads/ok/fine-1.2": oidB, tag: oidB}
	if !reflect.DeepEqual(got.Refs.Refs, want) {
		t.Errorf("kept %v, want %v", got.Refs.Refs, want)
	}
	if len(got.Skipped) != len(skip)-1 {
		t.Errorf("skipped %q, want %d names", got.Skipped, len(skip)-1)
	}
	got, err = parse(RefLimits{MaxRefLength: 30, CaseInsensitiveFS: true}, b.String(), 64)
	if err != nil {
		t.Fatal(err)
	}
	delete(want, tag)
	if !reflect.DeepEqual(got.Refs.Refs, want) {
		t.Errorf("MaxRefLength 30: kept %v, want %v", got.Refs.Refs, want)
	}
	if len(got.Skipped) != len(skip) {
		t.Errorf("MaxRefLength 30: skipped %q, want %d names", got.Skipped, len(skip))
	}
}

func TestTheFirstListingDropsLinesLongerThanAPktLine(t *testing.T) {
	out := oidA + "\trefs/heads/" + strings.Repeat("y", maxLine) + "\n" + oidB + "\trefs/heads/main\n"
	got, err := parse(RefLimits{}, out, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"refs/heads/main": oidB}; !reflect.DeepEqual(got.Refs.Refs, want) {
		t.Fatalf("kept %v, want %v", got.Refs.Refs, want)
	}
	if _, err := parse(RefLimits{MaxRefs: 1}, out, 4096); ClassOf(err) != ClassTooManyRefs {
		t.Fatalf("an overlong line is counted as a ref: %v, want %s", err, ClassTooManyRefs)
	}
}

func TestTheFirstListingRefusesTooManyUnmirrorableNames(t *testing.T) {
	var b strings.Builder
	name := "refs/heads/" + strings.Repeat("z", 4000)
	for i := 0; b.Len() < 2*maxSkippedBytes; i++ {
		b.WriteString(oidA + "\t" + name + string(rune('a'+i%26)) + "\n")
	}
	if _, err := parse(RefLimits{MaxRefLength: 1024}, b.String(), 1<<16); ClassOf(err) != ClassTooManyRefs {
		t.Fatalf("%d bytes of skipped names: %v, want %s", b.Len(), err, ClassTooManyRefs)
	}
}
