package ctl

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/api"
)

func TestNodesRevokeRevokesAndTheListShowsWhy(t *testing.T) {
	f := newFixture(t)
	f.b.nodes = []api.Node{{ID: 2, Name: "lab", Mode: "partial", State: "alive"}}
	code, out, errOut := f.run(t, "nodes", "revoke", "2", "--reason", "served forged history")
	if code != 0 || out != "revoked node 2\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, _ = f.run(t, "nodes")
	if code != 0 || !strings.Contains(out, "revoked: served forged history") {
		t.Errorf("exit %d output:\n%s", code, out)
	}
}

func TestNodesRevokeRefusesBadArguments(t *testing.T) {
	f := newFixture(t)
	f.b.nodes = []api.Node{{ID: 2, Name: "lab", Mode: "partial", State: "alive"}}
	for _, tt := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"nodes", "revoke"}, 2, "takes a node ID"},
		{[]string{"nodes", "revoke", "lab"}, 2, "want a positive integer"},
		{[]string{"nodes", "revoke", "0"}, 2, "want a positive integer"},
		{[]string{"nodes", "--reason", "x"}, 2, "only of"},
		{[]string{"repos", "--reason", "x"}, 2, "not a flag"},
		{[]string{"nodes", "revoke", "9"}, 1, "HTTP 404"},
	} {
		code, _, errOut := f.run(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.err) {
			t.Errorf("%v: exit %d stderr %q, want %d and %q", tt.args, code, errOut, tt.code, tt.err)
		}
	}
	if f.b.nodes[0].State != "alive" {
		t.Errorf("a refused command revoked the node: %+v", f.b.nodes[0])
	}
}

func TestNodesRevokeNeedsTheToken(t *testing.T) {
	f := newFixture(t)
	f.b.nodes = []api.Node{{ID: 2, Name: "lab", Mode: "partial", State: "alive"}}
	code := Main(t.Context(), []string{"nodes", "revoke", "2"}, &strings.Builder{}, &strings.Builder{}, f.env("wrong"))
	if code != 1 || f.b.nodes[0].State != "alive" {
		t.Errorf("exit %d, node %+v", code, f.b.nodes[0])
	}
}
