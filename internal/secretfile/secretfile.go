// Package secretfile keeps a secret that a process makes for itself at its
// first start in a file of its data directory, readable by its user only,
// so that later starts use the same one (gitfleet up's join token).
//
// It holds no secret in memory and logs nothing: callers say where the
// secret is, never what it is.
package secretfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReadOrCreate returns the secret kept at path, or makes one (24 random
// bytes, in hex) and keeps it there when the file is missing or empty;
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
	var raw [24]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	secret = hex.EncodeToString(raw[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", false, fmt.Errorf("keep a secret in %s: %w", path, err)
	}
	// Written aside and renamed: a crash leaves no half-written secret.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("keep a secret in %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", false, fmt.Errorf("keep a secret in %s: %w", path, err)
	}
	return secret, true, nil
}
