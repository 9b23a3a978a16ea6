package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePKI writes a test CA and a server certificate it signs for
// 127.0.0.1, and returns the PEM files: the CA, the certificate, its key.
func writePKI(t *testing.T) (caFile, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gitfleet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// With --tls-cert, the coordinator's gRPC and the full node's tunnels speak
// TLS: a partial node that trusts the CA mirrors through them; one that
// dials in plain TCP, or does not trust the certificate, is not let in.
func TestTLSBetweenTheFleetsMachines(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	caFile, certFile, keyFile := writePKI(t)
	f := newFleet(t)
	repos := seq(0, 5)
	f.seed(repos, "5 repositories")
	tunnelAddr := freeAddr(t)
	// A full node that fetches nothing itself: every repository comes from
	// the partial node, through its tunnel.
	start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", f.grpc, "--tunnel", tunnelAddr, "--join-token", f.token,
		"--capacity", "0", "--warmup-nodes", "1", "--tls-cert", certFile, "--tls-key", keyFile,
		"--allow-private-upstreams", "--catalog-interval", "1s", "--heartbeat", "500ms")
	f.startNode("partial-tls", "partial", "--tls-ca", caFile)
	f.startNode("partial-plain", "partial")
	f.startNode("partial-untrusting", "partial", "--tls")
	plain, untrusting := f.procs["partial-plain"], f.procs["partial-untrusting"]
	eventually(t, 60*time.Second, "all served through TLS tunnels", func() error { return f.servedLikeUpstream(repos) })
	for _, p := range []*proc{plain, untrusting} {
		log, _ := os.ReadFile(p.log)
		if strings.Contains(string(log), "registered") || !strings.Contains(string(log), "coordinator unreachable") {
			t.Errorf("%s was let in, or did not say why not:\n%s", p.name, log)
		}
	}
	if log, _ := os.ReadFile(untrusting.log); !strings.Contains(string(log), "certificate") {
		t.Errorf("the node that does not trust the certificate does not say so:\n%s", log)
	}
}
