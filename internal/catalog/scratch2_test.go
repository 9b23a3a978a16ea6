package catalog

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"
)

func TestScratchUpdateProfile(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	ctx := context.Background()
	b := &testing.B{}
	_ = b
	gitDir := os.TempDir() + "/gitfleet-catalog-bench/1000000-1000/.git"
	base, _ := resolveCommit(ctx, testGit, gitDir, "main")
	next, err := resolveCommit(ctx, testGit, gitDir, "refs/heads/bench-change-"+base[:12])
	if err != nil {
		t.Fatal(err)
	}
	old, _ := Load(ctx, testGit, gitDir, base, Options{})
	f, _ := os.Create("/tmp/upd.prof")
	pprof.StartCPUProfile(f)
	start := time.Now()
	for range 50 {
		old.Update(ctx, testGit, gitDir, next)
	}
	pprof.StopCPUProfile()
	t.Logf("%v per update", time.Since(start)/50)
	// phases
	for range 3 {
		t0 := time.Now()
		id, _ := resolveCommit(ctx, testGit, gitDir, next)
		t1 := time.Now()
		ch, _ := diffTree(ctx, testGit, gitDir, old.commit, id)
		t2 := time.Now()
		var blobs []blob
		for _, c := range ch {
			blobs = append(blobs, blob{path: c.path, oid: c.oid, kind: classify(c.path)})
		}
		_, ef, _ := readFiles(ctx, testGit, gitDir, blobs, old.defaults, old.opt)
		t3 := time.Now()
		touched := map[string]*fileData{}
		for _, f := range ef {
			touched[f.name.path] = f
		}
		_, kc := old.diffEntries(touched)
		t4 := time.Now()
		old.files.with(touched)
		t5 := time.Now()
		old.keys.with(kc)
		t6 := time.Now()
		t.Logf("resolve %v diff %v read %v diffEntries %v files %v keys %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5))
	}
}
