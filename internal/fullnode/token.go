package fullnode

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// apiToken returns the token that API writes need: the configured one, or
// one generated at the first start, kept in <data>/api-token and printed
// once.
func apiToken(dataDir, configured string, log *slog.Logger) (string, error) {
	if configured != "" {
		return configured, nil
	}
	p := filepath.Join(dataDir, "api-token")
	b, err := os.ReadFile(p)
	if err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read API token: %w", err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw[:])
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save API token: %w", err)
	}
	log.Warn("generated an API token for writes; it is shown only now (also kept in "+p+")", "token", token)
	return token, nil
}
