package node

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/tlsconf"
)

// tlsHint tells the operator of a node that dials its coordinator in clear
// when the coordinator speaks TLS: gRPC itself says only "error reading
// server preface: EOF", at every retry. It remembers, by address, what a
// probe found, so that the hint is logged once per change of state (a
// session that opens, or another failure, forgets it). Not safe for
// concurrent use: the coordinator loop owns it.
type tlsHint map[string]bool

// tlsProbeTimeout bounds the probe of one address.
const tlsProbeTimeout = 5 * time.Second

// observe takes the outcome of a session with the coordinator at addr,
// dialled in clear (err nil: it opened).
func (h tlsHint) observe(ctx context.Context, log *slog.Logger, addr string, err error) {
	if err == nil || !noServerPreface(err) {
		delete(h, addr)
		return
	}
	if _, probed := h[addr]; probed {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	h[addr] = tlsconf.SpeaksTLS(ctx, addr)
	if h[addr] {
		log.Error("the coordinator speaks TLS: add --tls (or --tls-ca FILE)", "coordinator", addr)
	}
}

// noServerPreface tells whether err is gRPC's failure to read an HTTP/2
// server's first frame: what a client in clear sees of a TLS server, which
// closes the connection ("error reading server preface: EOF", or
// "connection closed before server preface received").
func noServerPreface(err error) bool {
	return strings.Contains(err.Error(), "server preface")
}
