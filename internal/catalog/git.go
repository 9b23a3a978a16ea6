package catalog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"golang.org/x/sync/errgroup"
)

// resolveCommit turns a revision into a full commit ID.
func resolveCommit(ctx context.Context, git *gitcmd.Runner, repoDir, rev string) (string, error) {
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "rev-parse",
		Flags: []string{"--verify", "--quiet"}, Args: []string{rev + "^{commit}"}})
	if err != nil {
		return "", fmt.Errorf("catalog: %q is not a commit of %s: %w", rev, repoDir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// blob is a regular file of a catalog tree.
type blob struct {
	path string
	oid  string
	kind fileKind
}

// lsTree lists the regular files of commit that the catalog reads, all
// of them or those below dir. Symbolic links and submodules are not
// catalog files.
func lsTree(ctx context.Context, git *gitcmd.Runner, repoDir, commit, dir string) ([]blob, error) {
	args := []string{commit}
	if dir != "" {
		// "./" keeps a directory named "-x" or ":x" from reading as an
		// option or pathspec magic; globs may match more, so filter below.
		args = append(args, "./"+dir)
	}
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "ls-tree",
		Flags: []string{"-r", "-z", "--full-tree"}, Args: args})
	if err != nil {
		return nil, fmt.Errorf("catalog: list the files of %s: %w", commit, err)
	}
	return parseLsTree(out, commit, func(path string) bool { return dir == "" || strings.HasPrefix(path, dir+"/") })
}

// parseLsTree reads `git ls-tree -z` output: the regular catalog files
// among the paths keep accepts.
func parseLsTree(out []byte, commit string, keep func(path string) bool) ([]blob, error) {
	var blobs []blob
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		// "<mode> SP <type> SP <oid> TAB <path>"
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		fields := strings.Fields(string(meta))
		if !ok || len(fields) != 3 {
			return nil, fmt.Errorf("catalog: ls-tree of %s: unexpected line %q", commit, rec)
		}
		path := string(p)
		if !regularFile(fields[0]) || !keep(path) {
			continue
		}
		if k := classify(path); k != kindNone {
			blobs = append(blobs, blob{path: path, oid: fields[2], kind: k})
		}
	}
	return blobs, nil
}

func regularFile(mode string) bool { return mode == "100644" || mode == "100755" }

// treeChange is one path that differs between two commits; oid (oldOID)
// is empty when the path is not a regular file of the new (old) commit.
type treeChange struct {
	path   string
	oid    string
	oldOID string
}

// diffTree lists the catalog paths that differ between two commits.
func diffTree(ctx context.Context, git *gitcmd.Runner, repoDir, oldCommit, newCommit string) ([]treeChange, error) {
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "diff-tree",
		Flags: []string{"-r", "-z", "--no-renames", "--no-commit-id"}, Args: []string{oldCommit, newCommit}})
	if err != nil {
		return nil, fmt.Errorf("catalog: diff %s..%s: %w", oldCommit, newCommit, err)
	}
	// Records are ":<old mode> <new mode> <old oid> <new oid> <status>" NUL <path> NUL.
	var changes []treeChange
	for len(out) > 0 {
		meta, rest, ok1 := bytes.Cut(out, []byte{0})
		p, rest, ok2 := bytes.Cut(rest, []byte{0})
		fields := strings.Fields(string(meta))
		if !ok1 || !ok2 || len(fields) != 5 || !strings.HasPrefix(fields[0], ":") {
			return nil, fmt.Errorf("catalog: diff-tree %s..%s: unexpected record %q", oldCommit, newCommit, meta)
		}
		out = rest
		path := string(p)
		if classify(path) == kindNone {
			continue
		}
		ch := treeChange{path: path}
		if regularFile(fields[1]) {
			ch.oid = fields[3]
		}
		if regularFile(strings.TrimPrefix(fields[0], ":")) {
			ch.oldOID = fields[2]
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

// sizeSample is how many blobs estimateSize asks git the size of.
const sizeSample = 1024

// estimateSize estimates the total size of blobs from the sizes of up to
// sizeSample of them, spread evenly (all of them when there are fewer),
// read with one `git cat-file --batch-check`: listing the size of every
// file of a catalog of a million files would cost as much as reading
// them.
func estimateSize(ctx context.Context, git *gitcmd.Runner, repoDir string, blobs []blob) (int64, error) {
	if len(blobs) == 0 {
		return 0, nil
	}
	step := max(1, len(blobs)/sizeSample)
	var in strings.Builder
	n := 0
	for i := 0; i < len(blobs); i += step {
		in.WriteString(blobs[i].oid)
		in.WriteByte('\n')
		n++
	}
	out, err := git.Output(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "cat-file",
		Flags: []string{"--batch-check=%(objectsize)"}, Stdin: strings.NewReader(in.String())})
	if err != nil {
		return 0, fmt.Errorf("catalog: sizes of the files: %w", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != n {
		return 0, fmt.Errorf("catalog: sizes of the files: %d answers for %d files", len(lines), n)
	}
	var sum int64
	for _, l := range lines {
		size, err := strconv.ParseInt(l, 10, 64)
		if err != nil || size < 0 {
			return 0, fmt.Errorf("catalog: sizes of the files: git answered %q", l)
		}
		sum += size
	}
	return sum * int64(len(blobs)) / int64(n), nil
}

// catBlobs reads the blobs oids with one `git cat-file --batch` process
// and calls fn for each, in order, from one goroutine. data is nil when the
// blob is larger than maxFileSize (size says how large it was); otherwise
// it is fn's to keep, made by alloc (a length, any capacity) or, when
// alloc is nil, by make.
func catBlobs(ctx context.Context, git *gitcmd.Runner, repoDir string, oids []string, alloc func(n int) []byte, fn func(i int, size int64, data []byte) error) error {
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	if len(oids) == 0 {
		return nil
	}
	// git writes straight into an OS pipe that we read (an *os.File as
	// Stdout saves a copy through a goroutine). We read exactly len(oids)
	// blobs, so we need no EOF from it; closing our write end after git
	// exits turns an early exit into a read error.
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("catalog: read blobs: %w", err)
	}
	defer outR.Close()
	inR, inW := io.Pipe()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		bw := bufio.NewWriterSize(inW, 64<<10)
		for _, oid := range oids {
			bw.WriteString(oid)
			bw.WriteByte('\n')
		}
		inW.CloseWithError(bw.Flush())
		return nil
	})
	var gitErr error
	g.Go(func() error {
		gitErr = git.Run(ctx, gitcmd.Cmd{GitDir: repoDir, Name: "cat-file", Flags: []string{"--batch", "--buffer"}, Stdin: inR, Stdout: outW})
		inR.CloseWithError(io.ErrClosedPipe) // unblock the writer if git stopped early
		outW.Close()
		return gitErr
	})
	var readErr error
	g.Go(func() error {
		readErr = readBatch(bufio.NewReaderSize(outR, 1<<20), oids, alloc, fn)
		if readErr != nil {
			outR.Close() // git then fails writing and exits
		}
		return readErr
	})
	_ = g.Wait()
	// Whichever failed first, say why: an early end of git's output is the
	// reader's symptom of git's failure, and a killed git the consequence
	// of the reader's.
	if gitErr != nil && (readErr == nil || errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF)) {
		return fmt.Errorf("catalog: read blobs: %w", gitErr)
	}
	return readErr
}

func readBatch(r *bufio.Reader, oids []string, alloc func(n int) []byte, fn func(i int, size int64, data []byte) error) error {
	for i, oid := range oids {
		header, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("catalog: read blob %s: %w", oid, err)
		}
		// "<oid> blob <size>\n", or "<oid> missing\n"
		fields := strings.Fields(header)
		if len(fields) != 3 || fields[0] != oid || fields[1] != "blob" {
			return fmt.Errorf("catalog: read blob %s: git answered %q", oid, strings.TrimSpace(header))
		}
		size, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("catalog: read blob %s: bad size in %q", oid, strings.TrimSpace(header))
		}
		var data []byte
		if size <= maxFileSize {
			data = alloc(int(size))
			_, err = io.ReadFull(r, data)
		} else {
			_, err = io.CopyN(io.Discard, r, size)
		}
		if err == nil {
			var nl byte
			if nl, err = r.ReadByte(); err == nil && nl != '\n' {
				err = errors.New("no newline after the content")
			}
		}
		if err != nil {
			return fmt.Errorf("catalog: read blob %s: %w", oid, err)
		}
		if err := fn(i, size, data); err != nil {
			return err
		}
	}
	return nil
}
