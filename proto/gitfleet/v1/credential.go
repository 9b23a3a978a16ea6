package fleetv1

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// SecretHash is how a node's secret is kept by the coordinator and known
// to full nodes: the hex SHA-256 of the secret.
func SecretHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// TunnelProof proves to a full node that a tunnel comes from node id: an
// HMAC of the ID under the hash of the node's secret. Full nodes learn the
// hash (NodeCredentials), never the secret, so only the node itself (and
// the fleet's trusted parts) can make it.
func TunnelProof(secretHash string, id uint32) string {
	m := hmac.New(sha256.New, []byte(secretHash))
	fmt.Fprintf(m, "gitfleet-tunnel:%d", id)
	return hex.EncodeToString(m.Sum(nil))
}
