package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDocsConfigurationTableMatchesTheConfig(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Skip("no docs/configuration.md next to the module")
	}
	if !strings.Contains(string(b), Markdown()) {
		t.Fatalf("docs/configuration.md's table is out of date; replace it with the output of `gitfleet help config`:\n%s", Markdown())
	}
}

// The README's "flags you need" are real flags, with the defaults the code
// gives them.
func TestTheReadmesFlagsAreFlagsWithTheirDefaults(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("no README next to the module")
	}
	defaults := map[string]string{}
	for _, f := range Fields() {
		defaults[f.Name] = "`" + f.Default + "`"
		if f.Default == "" {
			defaults[f.Name] = "(none)"
		}
	}
	_, section, _ := strings.Cut(string(b), "\n## The flags you need\n")
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("^\\| `--([a-z0-9-]+)` \\| ([^|]+) \\|")
	n := 0
	for line := range strings.Lines(section) {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		want, ok := defaults[m[1]]
		switch {
		case !ok:
			t.Errorf("README.md's flags you need name --%s, which is no flag", m[1])
		case strings.TrimSpace(m[2]) != want:
			t.Errorf("README.md gives --%s the default %s; the code's is %s", m[1], m[2], want)
		}
	}
	if n < 8 {
		t.Errorf("README.md's \"The flags you need\" has %d rows of flags: want the 8-10 a first deployment sets", n)
	}
}

func TestFlagsOverrideYAMLWhichOverridesDefaults(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gitfleet.yaml")
	yaml := "grace: 30s\nfetchers: 4\nallow-private-upstreams: true\ncatalog: /srv/catalog\n"
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(UpCommand, []string{"--config", p, "--fetchers", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Grace != 30*time.Second || cfg.Fetchers != 7 || !cfg.AllowPrivateUpstreams || cfg.Catalog != "/srv/catalog" {
		t.Fatalf("got %+v", cfg)
	}
	if cfg.MaxInterval != Default().MaxInterval {
		t.Fatalf("an unset key lost its default: %v", cfg.MaxInterval)
	}
}

func TestUnknownOrBadYAMLKeysAreClearErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"gracee: 10s\n", `unknown key "gracee"`},
		{"grace: soon\n", "grace"},
		{"fetchers: [1\n", "gitfleet.yaml"},
	} {
		p := filepath.Join(t.TempDir(), "gitfleet.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(UpCommand, []string{"--config=" + p})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to mention %q", tc.yaml, err, tc.want)
		}
	}
}

func TestListsComeFromRepeatedFlagsOrYAMLLists(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gitfleet.yaml")
	if err := os.WriteFile(p, []byte("host-limit:\n  - github.com=5000/h\n  - gitee.com=600/h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(UpCommand, []string{"--config", p})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.HostLimit) != 2 || cfg.HostLimit[1] != "gitee.com=600/h" {
		t.Fatalf("from YAML: %q", cfg.HostLimit)
	}
	cfg, err = Load(UpCommand, []string{"--config", p, "--host-limit", "a.org=1/h", "--host-limit", "b.org=2/h,c.org=3/h"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostLimit.String() != "a.org=1/h,b.org=2/h,c.org=3/h" {
		t.Fatalf("flags should replace the YAML list and add up: %q", cfg.HostLimit)
	}
}

func TestTheDataDirectoryIsMadeAbsolute(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	for _, args := range [][]string{nil, {"--data", "./d"}} {
		cfg, err := Load(UpCommand, args)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(cwd, Default().Data)
		if args != nil {
			want = filepath.Join(cwd, "d")
		}
		if cfg.Data != want {
			t.Errorf("Load(%q).Data = %q, want %q", args, cfg.Data, want)
		}
	}
}

func TestParseBytesNamesTheWholeBadSize(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "300MB": 300e6, "1048576": 1 << 20, " 5B ": 5} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"5XB", "MiB", "-1GiB", "1.5GiB", "0"} {
		_, err := ParseBytes(in)
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseBytes(%q): error %v, want one that quotes %q", in, err, in)
		}
	}
}
