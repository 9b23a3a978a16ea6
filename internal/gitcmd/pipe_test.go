package gitcmd

import (
	"io"
	"testing"
)

// newBlockingPipe returns a reader that blocks until the writer is closed.
func newBlockingPipe(t *testing.T) (io.Reader, io.WriteCloser) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() })
	return pr, pw
}
