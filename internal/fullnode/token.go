package fullnode

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/secretfile"
)

// apiToken returns the token that API writes need: the configured one, or
// one generated at the first start, kept in <data>/api-token and printed
// once.
func apiToken(dataDir, configured string, log *slog.Logger) (string, error) {
	if configured != "" {
		return configured, nil
	}
	p := filepath.Join(dataDir, "api-token")
	token, created, err := secretfile.ReadOrCreate(p)
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	if created {
		log.Warn("generated an API token for writes; it is shown only now (also kept in "+p+")", "token", token)
	}
	return token, nil
}
