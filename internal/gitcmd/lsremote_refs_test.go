package gitcmd_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
)

func TestLsRemoteRefsKeepsExactlyTheNamedRefsAndHead(t *testing.T) {
	up, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	if err := up.Create("r", []string{"main", "dev"}, []string{"v1"}); err != nil {
		t.Fatal(err)
	}
	all, err := up.Refs("r")
	if err != nil {
		t.Fatal(err)
	}
	// A ref whose name ends like another: ls-remote's patterns match tails.
	if err := gittest.Git(filepath.Join(up.Dir, "r.git"), "update-ref", "refs/heads/x/refs/heads/main", all["refs/heads/dev"]); err != nil {
		t.Fatal(err)
	}
	git := gitcmd.New(gitcmd.Direct(), gitcmd.Options{})
	got, err := git.LsRemoteRefs(context.Background(), up.RepoURL("r"), []string{"refs/heads/main", "refs/tags/v1", "refs/heads/gone"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"refs/heads/main": all["refs/heads/main"], "refs/tags/v1": all["refs/tags/v1"]}
	if !reflect.DeepEqual(got.Refs, want) || got.Head != "refs/heads/main" {
		t.Fatalf("got %v (HEAD %q), want %v (HEAD refs/heads/main)", got.Refs, got.Head, want)
	}
	every, err := git.LsRemoteRefs(context.Background(), up.RepoURL("r"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(every.Refs) != len(all)+1 {
		t.Fatalf("no names: got %v, want every branch and tag", every.Refs)
	}
}
