package metrics

import (
	"io"
	"net/http"
)

// CountBytes wraps h so that add is told of every byte of the answers it
// writes (the body, not the headers): the bytes a git endpoint serves.
func CountBytes(h http.Handler, add func(n int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&countingWriter{ResponseWriter: w, add: add}, r)
	})
}

// countingWriter counts what is written through it. It flushes through to
// the writer it wraps, and unwraps for http.ResponseController.
type countingWriter struct {
	http.ResponseWriter
	add func(int)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	if n > 0 {
		c.add(n)
	}
	return n, err
}

// ReadFrom hands r to the wrapped writer's ReadFrom, where it has one:
// net/http's sends a file to a plain TCP connection with sendfile, which a
// copy through Write would defeat.
func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(c.ResponseWriter, r)
	if n > 0 {
		c.add(int(n))
	}
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
