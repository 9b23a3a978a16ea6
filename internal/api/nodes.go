package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gitfleet/gitfleet/internal/membership"
)

// NodeAdmin lists the fleet's nodes and revokes them.
type NodeAdmin interface {
	// Nodes lists the fleet's nodes.
	Nodes(ctx context.Context) ([]Node, error)
	// RevokeNode revokes a node for good; an error wrapping ErrNotFound
	// gives 404, ErrRefused 409.
	RevokeNode(ctx context.Context, id uint32, reason string) error
}

func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.fleet.Nodes.Nodes(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "cannot list nodes now: "+s.detail(r, err))
		return
	}
	if nodes == nil {
		nodes = []Node{}
	}
	writeJSON(w, http.StatusOK, map[string][]Node{"nodes": nodes})
}

// ErrRefused is returned (wrapped) by a backend that will not do what was
// asked as asked (a full node revoking itself); the API answers 409.
var ErrRefused = errors.New("refused")

// MaxRevokeReason bounds the reason given for a revocation.
const MaxRevokeReason = 512

// revokeRequest is the optional body of POST /api/v1/nodes/{id}/revoke.
type revokeRequest struct {
	Reason string `json:"reason"`
}

// revokeNode bans a node (the operator's token).
func (s *Server) revokeNode(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("node ID %q: want a positive integer", r.PathValue("id")))
		return
	}
	body, ok := readBody(w, r, 4096)
	if !ok {
		return
	}
	var req revokeRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if len(req.Reason) > MaxRevokeReason {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reason longer than %d bytes", MaxRevokeReason))
		return
	}
	if req.Reason == "" {
		req.Reason = membership.DefaultRevokeReason
	}
	err = s.fleet.Nodes.RevokeNode(r.Context(), uint32(id), req.Reason)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, membership.NotInFleet(uint32(id)))
		return
	case errors.Is(err, ErrRefused):
		writeError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("cannot revoke node %d now: %v", id, err))
		return
	}
	s.log.Warn("api: node revoked by the operator", "node", id, "reason", req.Reason)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "state": "revoked", "revoked_reason": req.Reason})
}
