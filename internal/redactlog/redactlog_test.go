package redactlog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretsNeverReachTheLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(slog.NewTextHandler(&buf, nil)))
	secret := "ghp_" + strings.Repeat("S", 36)
	log.With("catalog", "https://u:"+secret+"@h.example/x.git").WithGroup("g").Error(
		"bad line https://user:pw@h.example/s/x.git",
		"url", "https://"+secret+"@h.example/s/x.git",
		"err", errors.New("fetch https://u:pw2@h.example/y failed"),
		slog.Group("inner", "token", secret),
		"n", 3)
	out := buf.String()
	for _, leak := range []string{secret, ":pw@", "pw2", "SSSS"} {
		if strings.Contains(out, leak) {
			t.Errorf("log holds %q: %s", leak, out)
		}
	}
	if strings.Count(out, "REDACTED") < 5 || !strings.Contains(out, "n=3") {
		t.Errorf("log: %s", out)
	}
}
