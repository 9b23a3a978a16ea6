// Package tlsconf builds the TLS configurations of the fleet's own
// connections: the coordinator's gRPC listener and a full node's tunnel
// listener (server side), and the nodes that dial them (client side); and
// it tells whether a peer speaks TLS, for a node that dials it in clear.
package tlsconf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// Server loads a certificate and its key (PEM files) for a listener. Both
// empty means no TLS (nil); one without the other is an error.
func Server(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("tls: --tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load --tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Client returns the configuration of a node that dials over TLS: the
// peers' certificates are verified against the certificates of caFile
// (PEM), or against the system's roots when caFile is empty. enabled false
// with no caFile means plain TCP (nil).
func Client(enabled bool, caFile string) (*tls.Config, error) {
	if !enabled && caFile == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: --tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: --tls-ca %s holds no PEM certificate", caFile)
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

// Pinned returns a client configuration that accepts exactly the first
// certificate of server, whatever name the connection is made to: for a
// process that dials its own listener (gitfleet up), whose certificate
// names the public host, not the loopback address.
func Pinned(server *tls.Config) *tls.Config {
	if server == nil || len(server.Certificates) == 0 || len(server.Certificates[0].Certificate) == 0 {
		return nil
	}
	want := server.Certificates[0].Certificate[0]
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The usual verification is replaced by the comparison below, not
		// skipped: only this very certificate is accepted.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], want) {
				return errors.New("tls: the peer's certificate is not this process's own")
			}
			return nil
		},
	}
}

// SpeaksTLS tells whether the server at addr answers a TLS handshake. A
// node that dials a TLS listener in clear sees only its connection closed
// (gRPC: "error reading server preface: EOF"); this probe tells it what to
// add. It verifies nothing and sends nothing but a handshake: it only
// learns whether the other end speaks TLS, if only to refuse the probe.
func SpeaksTLS(ctx context.Context, addr string) bool {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	probe := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // no data is sent: see above
	err = tls.Client(conn, probe).HandshakeContext(ctx)
	// A TLS alert from the server (a refusal) is TLS too.
	var remote *net.OpError
	return err == nil || errors.As(err, &remote) && remote.Op == "remote error"
}
