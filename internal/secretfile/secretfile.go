// Package secretfile keeps a secret that a process makes for itself at its
// first start in a file of its data directory, readable by its user only,
// so that later starts use the same one (gitfleet up's join token, a full
// node's API token).
//
// It holds no secret in memory and logs nothing: callers say where the
// secret is, never what it is.
package secretfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gitfleet/gitfleet/internal/atomicfile"
)

// ReadOrCreate returns the secret kept at path, or makes one
// (crypto/rand.Text: 26 characters, 128 random bits) and keeps it there when the file is missing or empty;
// created tells which.
func ReadOrCreate(path string) (secret string, created bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, false, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("read the secret in %s: %w", path, err)
	}
	secret = rand.Text()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", false, fmt.Errorf("keep a secret in %s: %w", path, err)
	}
	// A crash leaves the old file or the new one, never a half-written secret.
	if err := atomicfile.Write(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("keep a secret: %w", err)
	}
	return secret, true, nil
}
