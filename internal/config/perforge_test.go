package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/forge"
)

// Every row of forge's table that takes webhooks has its secret setting,
// as a flag and a YAML key, in help and in docs/configuration.md, and a row
// without webhooks has none: the settings come from the table.
func TestEveryForgeWithWebhooksHasItsSecretSetting(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	help := Help(NodeCommand)
	withHooks := 0
	for _, k := range forge.Kinds() {
		name := "webhook-secret-" + string(k)
		w := forge.WebhookOf(k)
		if w == nil {
			if _, err := Load(NodeCommand, []string{"--mode", "full", "--" + name, "s"}); err == nil {
				t.Errorf("--%s is a flag, but %s takes no webhooks", name, k)
			}
			continue
		}
		withHooks++
		cfg, err := Load(NodeCommand, []string{"--mode", "full", "--" + name, "flag-" + string(k)})
		if err != nil {
			t.Errorf("--%s: %v", name, err)
		} else if got := cfg.WebhookSecrets[k]; got != "flag-"+string(k) || len(cfg.WebhookSecrets) != 1 {
			t.Errorf("--%s set %q, want only %s's secret", name, cfg.WebhookSecrets, k)
		}
		p := filepath.Join(t.TempDir(), "gitfleet.yaml")
		if err := os.WriteFile(p, []byte(name+": yaml-"+string(k)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err = Load(UpCommand, []string{"--config", p})
		if err != nil {
			t.Errorf("YAML key %s: %v", name, err)
		} else if got := cfg.WebhookSecrets[k]; got != "yaml-"+string(k) {
			t.Errorf("YAML key %s set %q", name, cfg.WebhookSecrets)
		}
		if _, err := Load(CoordinatorCommand, []string{"--" + name, "s"}); err == nil || !strings.Contains(err.Error(), "is a flag of node (full) and up") {
			t.Errorf("the coordinator given --%s: %v, want it named a flag of the full node", name, err)
		}
		row := "| `--" + name + "` | node (full) and up | string | (none) | secret of " + w.Name + " webhooks (overrides --webhook-secret) |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/configuration.md lacks the row %s", row)
		}
		if !strings.Contains(help, "--"+name+" string") {
			t.Errorf("gitfleet node -h does not list --%s", name)
		}
	}
	if withHooks == 0 {
		t.Fatal("no kind of forge takes webhooks: the test tests nothing")
	}
}

// A help text that speaks of forge's table says what the table says.
func TestHelpTextsNameTheForgesOfTheTable(t *testing.T) {
	var forgeHelp, autoAdd string
	for _, f := range Fields() {
		if strings.Contains(f.Help, "{") {
			t.Errorf("--%s's help keeps a placeholder: %s", f.Name, f.Help)
		}
		switch f.Name {
		case "forge":
			forgeHelp = f.Help
		case "webhook-auto-add":
			autoAdd = f.Help
		}
	}
	for _, k := range forge.Kinds() {
		if !strings.Contains(forgeHelp, " "+string(k)) {
			t.Errorf("--forge's help does not name the kind %s: %s", k, forgeHelp)
		}
		if w := forge.WebhookOf(k); w != nil && strings.Contains(autoAdd, w.Name) != w.AutoAdd {
			t.Errorf("--webhook-auto-add's help %q, but %s's AutoAdd is %v", autoAdd, w.Name, w.AutoAdd)
		}
	}
	for host := range forge.DefaultForges() {
		if !strings.Contains(forgeHelp, host) {
			t.Errorf("--forge's help does not name the well-known host %s: %s", host, forgeHelp)
		}
	}
}
