package catalog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
)

// Generate writes a synthetic catalog repository of repos entries into dir
// (which must not hold a repository yet): .list files of perFile https
// URLs each, in one commit on branch main with a fixed identity and date,
// so that the same arguments always give the same commit ID. The work tree
// is checked out. It streams everything through one `git fast-import`, so
// a million entries take seconds. It returns the commit ID.
func Generate(ctx context.Context, git *gitcmd.Runner, dir string, repos, perFile int) (string, error) {
	if repos < 1 || perFile < 1 {
		return "", fmt.Errorf("catalog: generate: want at least one repository and one per file, got %d and %d", repos, perFile)
	}
	// git runs in a neutral directory (package gitcmd): give it absolute paths.
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("catalog: generate in %q: %w", dir, err)
	}
	dir = absDir
	gitDir := filepath.Join(dir, ".git")
	if err := git.Run(ctx, gitcmd.Cmd{Name: "init", Flags: []string{"--quiet", "--initial-branch=main", "--template="}, Args: []string{dir}}); err != nil {
		return "", fmt.Errorf("catalog: generate in %s: %w", dir, err)
	}
	err = fastImport(ctx, git, gitDir, func(w *bufio.Writer) {
		files := (repos + perFile - 1) / perFile
		var buf []byte
		for f := range files {
			buf = appendGenList(buf[:0], f*perFile, min(perFile, repos-f*perFile))
			fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", f+1, len(buf))
			w.Write(buf)
			w.WriteByte('\n')
		}
		msg := fmt.Sprintf("gitfleet catalog gen: %d repositories, %d per file\n", repos, perFile)
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter %s\ndata %d\n%s", genIdentity, len(msg), msg)
		for f := range files {
			fmt.Fprintf(w, "M 100644 :%d %s\n", f+1, genPath(f))
		}
	})
	if err != nil {
		return "", fmt.Errorf("catalog: generate in %s: %w", dir, err)
	}
	if err := git.Run(ctx, gitcmd.Cmd{GitDir: gitDir, Dir: dir, Name: "read-tree",
		Flags: []string{"--reset", "-u"}, Args: []string{"HEAD"}}); err != nil {
		return "", fmt.Errorf("catalog: generate in %s: check out: %w", dir, err)
	}
	return resolveCommit(ctx, git, gitDir, "HEAD")
}

const genIdentity = "gitfleet gen <gen@gitfleet.invalid> 1700000000 +0000"

var genHosts = [...]string{"github.com", "gitlab.com", "gitee.com", "codeberg.org"}

// genPath is the path of the f-th generated file.
func genPath(f int) string { return fmt.Sprintf("lists/%05d.list", f) }

// appendGenURL appends the i-th generated upstream.
func appendGenURL(buf []byte, i int) []byte {
	return fmt.Appendf(buf, "https://%s/group-%04d/repo-%07d", genHosts[i%len(genHosts)], i/1000%10000, i)
}

// appendGenList appends the lines of n generated URLs from first.
func appendGenList(buf []byte, first, n int) []byte {
	for i := first; i < first+n; i++ {
		buf = appendGenURL(buf, i)
		buf = append(buf, '\n')
	}
	return buf
}

// fastImport runs `git fast-import` on the stream that write produces.
func fastImport(ctx context.Context, git *gitcmd.Runner, gitDir string, write func(w *bufio.Writer)) error {
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(w, 1<<20)
		write(bw)
		bw.WriteString("done\n")
		err := bw.Flush()
		w.CloseWithError(err)
		done <- err
	}()
	err := git.Run(ctx, gitcmd.Cmd{GitDir: gitDir, Name: "fast-import", Flags: []string{"--quiet", "--done"}, Stdin: r})
	r.CloseWithError(io.ErrClosedPipe) // unblock the writer if git stopped early
	return errors.Join(err, ignoreClosed(<-done))
}

func ignoreClosed(err error) error {
	if errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return err
}
