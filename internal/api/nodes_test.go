package api

import (
	"net/http"
	"testing"
)

func TestRevokeNode(t *testing.T) {
	b := newFakeBackend()
	b.nodes = []Node{{ID: 3, Name: "lab", Mode: "partial", State: "alive"}}
	e := newTestEnv(t, Config{}, b)

	wantError(t, e.do(t, "POST", "/api/v1/nodes/3/revoke", nil), http.StatusUnauthorized, "needs an API token")
	wantError(t, e.do(t, "POST", "/api/v1/nodes/x/revoke", nil, auth), http.StatusBadRequest, "positive integer")
	wantError(t, e.do(t, "POST", "/api/v1/nodes/0/revoke", nil, auth), http.StatusBadRequest, "positive integer")
	wantError(t, e.do(t, "POST", "/api/v1/nodes/3/revoke", []byte(`{"why": 1}`), auth), http.StatusBadRequest, "")
	wantError(t, e.do(t, "POST", "/api/v1/nodes/9/revoke", nil, auth), http.StatusNotFound, "node 9 is not in the fleet")
	wantError(t, e.do(t, "GET", "/api/v1/nodes/3/revoke", nil, auth), http.StatusMethodNotAllowed, "not allowed")
	if b.nodes[0].State != "alive" {
		t.Fatalf("a refused request revoked the node: %+v", b.nodes[0])
	}

	r := e.do(t, "POST", "/api/v1/nodes/3/revoke", []byte(`{"reason": "forged history"}`), auth)
	var got struct {
		ID     uint32 `json:"id"`
		State  string `json:"state"`
		Reason string `json:"revoked_reason"`
	}
	r.decode(t, &got)
	if r.status != http.StatusOK || got.ID != 3 || got.State != "revoked" || got.Reason != "forged history" {
		t.Errorf("status %d answer %+v", r.status, got)
	}
	if b.nodes[0].State != "revoked" || b.nodes[0].RevokedReason != "forged history" {
		t.Errorf("node %+v", b.nodes[0])
	}
	// No body: an operator's revocation with the default reason.
	b.nodes = append(b.nodes, Node{ID: 4, State: "alive"})
	if r := e.do(t, "POST", "/api/v1/nodes/4/revoke", nil, auth); r.status != http.StatusOK || b.nodes[1].RevokedReason != "revoked by an operator" {
		t.Errorf("status %d node %+v", r.status, b.nodes[1])
	}
}
