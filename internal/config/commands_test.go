package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEverySettingNamesItsRolesTopicAndEssentials(t *testing.T) {
	for _, f := range Fields() {
		if len(f.Roles) == 0 {
			t.Errorf("--%s: no roles tag: say which roles (commands) take it", f.Name)
		}
		for _, r := range append(slices.Clone(f.Roles), f.Essential...) {
			if !slices.Contains(allRoles, r) {
				t.Errorf("--%s: unknown role %q", f.Name, r)
			}
		}
		for _, r := range f.Essential {
			if !slices.Contains(f.Roles, r) {
				t.Errorf("--%s: essential for %s, which does not take it", f.Name, r)
			}
		}
		if !knownTopic(f.Topic) {
			t.Errorf("--%s: topic %q is not one of the help's topics", f.Name, f.Topic)
		}
		if f.Help == "" {
			t.Errorf("--%s: no help", f.Name)
		}
	}
}

func TestEachCommandTakesOnlyItsOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		cmd            Command
		takes, refuses []string
	}{
		{UpCommand, []string{"catalog", "http", "grpc", "tunnel", "join-token", "etcd", "capacity", "alert"}, []string{"mode", "coordinator", "metrics"}},
		{DemoCommand, []string{"http", "log-level"}, []string{"mode", "etcd", "tls", "catalog", "data", "join-token"}},
		{NodeCommand, []string{"mode", "coordinator", "http", "tls", "join-token", "full-token", "disk-quota"}, []string{"catalog", "grpc", "etcd", "heartbeat", "grace"}},
		{CoordinatorCommand, []string{"catalog", "grpc", "etcd", "heartbeat", "join-token", "tls-cert"}, []string{"mode", "http", "coordinator", "tls", "alert", "fetchers"}},
	} {
		for _, name := range tc.takes {
			if !slices.Contains(flagNames(tc.cmd), name) {
				t.Errorf("%s does not take --%s", tc.cmd.Name, name)
			}
		}
		for _, name := range tc.refuses {
			_, err := Load(tc.cmd, []string{"--" + name, "x"})
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--"+name+" is a flag of ") {
				t.Errorf("%s --%s: err = %v, want a usage error naming the commands that take it", tc.cmd.Name, name, err)
			}
		}
	}
}

func TestABadCommandLineIsOneLineThatSaysWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		cmd  Command
		args []string
		want string
	}{
		{UpCommand, []string{"--catalg", "x"}, "gitfleet up: unknown flag --catalg (did you mean --catalog? see gitfleet up -h)"},
		{UpCommand, []string{"--webhook-secret-git", "s"}, "gitfleet up: unknown flag --webhook-secret-git (did you mean --webhook-secret-github, --webhook-secret-gitlab or --webhook-secret-gitee? see gitfleet up -h)"},
		{UpCommand, []string{"--frobnicate"}, "gitfleet up: unknown flag --frobnicate (see gitfleet up -h)"},
		{UpCommand, []string{"--mode", "full"}, "gitfleet up: --mode is a flag of node, not of up (see gitfleet up -h)"},
		{DemoCommand, []string{"--tls"}, "gitfleet demo: --tls is a flag of node and up, not of demo (see gitfleet demo -h)"},
		{NodeCommand, []string{"--grace", "1m"}, "gitfleet node: --grace is a flag of coordinator and up, not of node (see gitfleet node -h)"},
		{CoordinatorCommand, []string{"--http", ":80"}, "gitfleet coordinator: --http is a flag of node (full), up and demo, not of coordinator (see gitfleet coordinator -h)"},
		{UpCommand, []string{"--grace", "soon"}, `gitfleet up: invalid value "soon" for --grace: parse error (see gitfleet up -h)`},
		{UpCommand, []string{"--grace"}, "gitfleet up: flag needs an argument: --grace (see gitfleet up -h)"},
		{UpCommand, []string{"catalog.git"}, `gitfleet up: unexpected argument "catalog.git": up takes flags only (see gitfleet up -h)`},
	} {
		_, err := Load(tc.cmd, tc.args)
		var ue *UsageError
		if !errors.As(err, &ue) || err.Error() != tc.want {
			t.Errorf("%s %q:\n got %v\nwant %s", tc.cmd.Name, tc.args, err, tc.want)
		}
	}
	if _, err := Load(UpCommand, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

func TestAYAMLKeyOfAnotherCommandIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gitfleet.yaml")
	if err := os.WriteFile(p, []byte("data: /srv/x\ngrace: 30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(NodeCommand, []string{"--config", p})
	want := `gitfleet.yaml:2: "grace" is a setting of coordinator and up, not of node`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to contain %q", err, want)
	}
	if _, err := Load(CoordinatorCommand, []string{"--config", p}); err != nil {
		t.Fatalf("the coordinator takes both keys: %v", err)
	}
}

func TestHelpShowsACommandsFlagsOnceEssentialsFirstThenByTopic(t *testing.T) {
	for _, cmd := range Commands() {
		h := Help(cmd)
		shown := map[string]int{} // the flags whose heads the help shows
		for _, line := range strings.Split(h, "\n") {
			if head, ok := strings.CutPrefix(line, "  --"); ok {
				shown[strings.Fields(head)[0]]++
			}
		}
		for _, name := range flagNames(cmd) {
			if shown[name] != 1 {
				t.Errorf("%s -h shows --%s %d times, want once", cmd.Name, name, shown[name])
			}
		}
		for name := range shown {
			if !slices.Contains(flagNames(cmd), name) {
				t.Errorf("%s -h shows --%s, which it does not take", cmd.Name, name)
			}
		}
		for _, line := range strings.Split(h, "\n") {
			if len(line) > helpWidth && strings.Contains(strings.TrimSpace(line), " ") {
				t.Errorf("%s -h: a line of %d columns: %q", cmd.Name, len(line), line)
			}
		}
	}
	h := Help(UpCommand)
	essentials, rest, ok := strings.Cut(h, "\n\n")
	if !ok || !strings.HasPrefix(essentials, "Essential flags:\n") {
		t.Fatalf("up -h does not start with its essential flags:\n%s", h)
	}
	for _, name := range []string{"catalog", "data", "http", "grpc", "join-token"} {
		if !strings.Contains(essentials, "  --"+name+" ") {
			t.Errorf("up -h: --%s is not among the essential flags:\n%s", name, essentials)
		}
	}
	last := -1
	for _, topic := range []string{"Catalog:", "Serving git, the API and the console:", "Alerts:", "Process: "} {
		i := strings.Index(rest, "\n"+topic)
		if i < last {
			t.Errorf("up -h: %q is not in the topics' order", topic)
		}
		last = i
	}
	if !strings.Contains(Help(NodeCommand), "[--mode full only]") {
		t.Errorf("node -h does not say which flags are a full node's only")
	}
}

func TestTheTableSaysWhichCommandsTakeEachSetting(t *testing.T) {
	md := Markdown()
	for _, row := range []string{
		"| `--mode` | node |",
		"| `--catalog` | coordinator and up |",
		"| `--http` | node (full), up and demo |",
		"| `--join-token` | coordinator, node (partial) and up |",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("the table has no row starting %s", row)
		}
	}
}

func TestSuggestions(t *testing.T) {
	names := []string{"catalog", "catalog-interval", "data", "grpc", "http"}
	for in, want := range map[string][]string{
		"catalg":   {"catalog"},
		"catalog-": {"catalog-interval"},
		"htp":      {"http"},
		"dat":      {"data"},
		"zzzzzz":   nil,
	} {
		if got := suggest(in, names); !slices.Equal(got, want) {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
