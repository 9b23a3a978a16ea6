package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/ctl"
	"github.com/gitfleet/gitfleet/internal/testnet"
)

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestGitfleetAlonePrintsItsUsageAndExits2(t *testing.T) {
	code, out, errOut := runArgs()
	if code != 2 || out != "" || errOut != usage {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
}

// The usage names every ctl command: it takes them from ctl, and this
// test reads them back.
func TestTheUsageNamesEveryCtlCommand(t *testing.T) {
	_, section, _ := strings.Cut(usage, "gitfleet ctl COMMAND")
	section, _, _ = strings.Cut(section, "gitfleet catalog")
	named := map[string]bool{}
	for _, w := range strings.FieldsFunc(section, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		named[w] = true
	}
	for _, cmd := range ctl.Commands() {
		if !named[cmd] {
			t.Errorf("gitfleet's usage does not name ctl %s:\n%s", cmd, usage)
		}
	}
	for _, line := range strings.Split(usage, "\n") {
		if len(line) > 80 {
			t.Errorf("a line of %d columns: %q", len(line), line)
		}
	}
}

// A bad command line is one line on stderr and exit status 2: nothing
// else, neither the usage nor the error twice.
func TestABadFlagIsOneLineAndExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--catalg", "x"}, "gitfleet up: unknown flag --catalg (did you mean --catalog? see gitfleet up -h)\n"},
		{[]string{"up", "--mode", "full"}, "gitfleet up: --mode is a flag of node, not of up (see gitfleet up -h)\n"},
		{[]string{"demo", "--etcd", "http://e:2379"}, "gitfleet demo: --etcd is a flag of coordinator and up, not of demo (see gitfleet demo -h)\n"},
		{[]string{"node", "--heartbeat", "1s"}, "gitfleet node: --heartbeat is a flag of coordinator and up, not of node (see gitfleet node -h)\n"},
		{[]string{"doctor", "up", "--coordinator", "c:7070"}, "gitfleet doctor up: --coordinator is a flag of node, not of doctor up (see gitfleet doctor up -h)\n"},
		{[]string{"doctor", "partial", "--frob"}, "gitfleet doctor partial: unknown flag --frob (see gitfleet doctor partial -h)\n"},
	} {
		code, out, errOut := runArgs(tc.args...)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// -h shows the command's own flags, grouped, on stdout, and exits 0;
// `gitfleet help up` says the same.
func TestACommandsHelpShowsItsOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		cmd           string
		shows, hidden []string
	}{
		{"up", []string{"--catalog", "--http", "--join-token", "--etcd"}, []string{"--mode", "--coordinator", "--metrics"}},
		{"demo", []string{"--http", "--log-level"}, []string{"--mode", "--etcd", "--tls", "--catalog"}},
		{"coordinator", []string{"--catalog", "--grpc", "--etcd"}, []string{"--mode", "--http", "--tls "}},
		{"node", []string{"--mode", "--coordinator", "--http", "--tls"}, []string{"--catalog", "--grpc", "--etcd"}},
	} {
		code, out, errOut := runArgs(tc.cmd, "-h")
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: gitfleet "+tc.cmd+" [flags]") || !strings.Contains(out, "Essential flags:") {
			t.Errorf("%s -h: exit %d, stderr %q, stdout:\n%s", tc.cmd, code, errOut, out)
		}
		for _, f := range tc.shows {
			if !strings.Contains(out, "\n  "+f) {
				t.Errorf("%s -h does not show %s", tc.cmd, f)
			}
		}
		for _, f := range tc.hidden {
			if strings.Contains(out, "\n  "+f+"\n") || strings.Contains(out, "\n  "+f+" ") {
				t.Errorf("%s -h shows %s, which it does not take", tc.cmd, f)
			}
		}
		if code, again, _ := runArgs("help", tc.cmd); code != 0 || again != out {
			t.Errorf("gitfleet help %s: exit %d, not the same as %s -h", tc.cmd, code, tc.cmd)
		}
	}
	if code, out, _ := runArgs("doctor", "up", "-h"); code != 0 || !strings.Contains(out, "--server URL") || !strings.Contains(out, "--catalog") || strings.Contains(out, "\n  --mode") {
		t.Errorf("doctor up -h: exit %d:\n%s", code, out)
	}
}

// up checks its flags and binds every port before it starts a role: a
// port in use stops it with nothing started, no token made or printed.
func TestUpOnABusyPortStartsNothing(t *testing.T) {
	t.Setenv("GITFLEET_JOIN_TOKEN", "")
	t.Setenv("GITFLEET_FULL_TOKEN", "")
	busy, err := net.Listen("tcp", testnet.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, port := range []string{"grpc", "http", "tunnel", "pprof"} {
		data := filepath.Join(t.TempDir(), "up")
		addrs := map[string]string{"grpc": testnet.Addr(t), "http": testnet.Addr(t), "tunnel": testnet.Addr(t), "pprof": testnet.Addr(t)}
		addrs[port] = busy.Addr().String()
		args := []string{"up", "--data", data, "--catalog", filepath.Join(t.TempDir(), "catalog")}
		for _, p := range []string{"grpc", "http", "tunnel", "pprof"} {
			args = append(args, "--"+p, addrs[p])
		}
		code, out, errOut := runArgs(args...)
		want := "gitfleet: listen --" + port + " " + busy.Addr().String() + ": "
		if code != 1 || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("--%s busy: exit %d, stdout %q, stderr %q; want 1 and one line %q...", port, code, out, errOut, want)
		}
		if entries, err := os.ReadDir(data); err == nil {
			t.Errorf("--%s busy: up made its data directory: %v", port, entries)
		}
		for _, p := range []string{"grpc", "http", "tunnel", "pprof"} {
			if p == port {
				continue
			}
			ln, err := net.Listen("tcp", addrs[p]) // up let go of every port it bound
			if err != nil {
				t.Errorf("--%s busy: --%s %s still bound: %v", port, p, addrs[p], err)
				continue
			}
			ln.Close()
		}
	}
}

// A setting that is missing or wrong stops up before it binds a port or
// makes anything.
func TestUpWithoutACatalogStartsNothing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "up")
	code, out, errOut := runArgs("up", "--data", data, "--http", testnet.Addr(t), "--grpc", testnet.Addr(t), "--tunnel", testnet.Addr(t))
	if code != 1 || out != "" || errOut != "gitfleet: up: coordinator: a catalog is required (--catalog PATH_OR_URL)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("up made its data directory")
	}
}

// A flag whose value is wrong stops up before it binds a port.
func TestUpWithABadValueStartsNothing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "up")
	http := testnet.Addr(t)
	code, out, errOut := runArgs("up", "--data", data, "--catalog", "c", "--http", http, "--grpc", testnet.Addr(t), "--tunnel", testnet.Addr(t),
		"--disk-quota", "5XB")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "gitfleet: --disk-quota: bad size \"5XB\"") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("up made its data directory")
	}
}
