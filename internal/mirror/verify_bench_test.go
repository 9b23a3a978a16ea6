package mirror_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/benchsize"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/internal/mirror"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// synthRepo writes an upstream of commits commits, each changing filesPer
// of files files (about 100 bytes each), with git fast-import, and returns
// its name. Under -short it is at most 20 commits over 50 files.
func synthRepo(b *testing.B, up *gittest.Upstreams, name string, commits, files, filesPer int) string {
	b.Helper()
	commits, files = benchsize.Of(commits, min(commits, 20)), benchsize.Of(files, min(files, 50))
	filesPer = min(filesPer, files)
	bare := filepath.Join(up.Dir, name+".git")
	if err := gittest.Git("", "init", "-q", "--bare", "-b", "main", bare); err != nil {
		b.Fatal(err)
	}
	var s strings.Builder
	for c := 0; c < commits; c++ {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter A U Thor <a@example.org> %d +0000\ndata 9\ncommit %02d\n", 1700000000+c, c%100)
		n := filesPer
		if c == 0 {
			n = files
		}
		for j := 0; j < n; j++ {
			f := (c*filesPer + j) % files
			body := fmt.Sprintf("file %d at commit %d %s\n", f, c, strings.Repeat("x", 64))
			fmt.Fprintf(&s, "M 100644 inline dir%02d/file%05d.txt\ndata %d\n%s", f%50, f, len(body), body)
		}
		s.WriteString("\n")
	}
	cmd := exec.Command("git", "--git-dir="+bare, "fast-import", "--quiet")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(s.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("fast-import: %v: %s", err, out)
	}
	return name
}

// BenchmarkVerify measures one verification of a small and a medium
// mirror (Verify: the scan of object files, the CRC-32 of every packed
// object and git rev-list --objects --all), and the alternatives
// considered: git fsck --connectivity-only (which finds no bit rot inside
// a blob), and git fsck and git verify-pack, which find it as the CRCs do
// but inflate and hash every object.
func BenchmarkVerify(b *testing.B) {
	up, err := gittest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	st, err := mirror.Open(b.TempDir(), gitcmd.New(gitcmd.Direct(), gitcmd.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, size := range []struct {
		name                     string
		commits, files, filesPer int
	}{
		{"small", 10, 20, 2},       // about 100 objects
		{"medium", 2000, 5000, 10}, // about 49,000 objects
	} {
		url := up.RepoURL(synthRepo(b, up, size.name, size.commits, size.files, size.filesPer))
		key := repokey.Key(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), ".git"))
		if _, err := st.Sync(ctx, key, url); err != nil {
			b.Fatal(err)
		}
		b.Run(size.name+"/verify", func(b *testing.B) {
			for b.Loop() {
				if err := st.Verify(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
			reportShare(b)
		})
		for _, alt := range []struct {
			name string
			args []string
		}{
			{"fsck-connectivity", []string{"fsck", "--connectivity-only", "--no-dangling", "--no-progress"}},
			{"fsck", []string{"fsck", "--no-dangling", "--no-progress"}},
			{"verify-pack", append([]string{"verify-pack"}, packIndexes(b, st.Path(key))...)},
		} {
			b.Run(size.name+"/"+alt.name, func(b *testing.B) {
				for b.Loop() {
					if err := gittest.Git(st.Path(key), alt.args...); err != nil {
						b.Fatal(err)
					}
				}
				reportShare(b)
			})
		}
	}
}

// packIndexes lists the pack indexes of the repository at dir.
func packIndexes(b *testing.B, dir string) []string {
	idxs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.idx"))
	if err != nil || len(idxs) == 0 {
		b.Fatalf("no pack index in %s: %v", dir, err)
	}
	return idxs
}

// reportShare reports, from the time of one verification, the share of
// one core that verifying 10,000 such mirrors once a week (the default
// --verify-interval) takes: 10,000 x t / 604,800 s.
func reportShare(b *testing.B) {
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/verify")
	b.ReportMetric(100*10000*per.Seconds()/(7*24*3600), "%core@10k/week")
}
