package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// handshake runs a TLS handshake between server and client over loopback
// and returns the client's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		c.Close()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Handshake()
}

func TestHalfConfiguredServerIsAnError(t *testing.T) {
	if _, err := Server("cert.pem", ""); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	if _, err := Server("", "key.pem"); err == nil {
		t.Error("a key without its certificate was accepted")
	}
	if c, err := Server("", ""); c != nil || err != nil {
		t.Errorf("no files: got %v, %v; want plain TCP", c, err)
	}
	if _, err := Server(filepath.Join(t.TempDir(), "missing.pem"), "missing.key"); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Errorf("missing files: %v, want an error naming the flag", err)
	}
}

func TestClientTrustsOnlyItsCA(t *testing.T) {
	dir := t.TempDir()
	certA, keyA := selfSigned(t, dir, "a")
	certB, _ := selfSigned(t, dir, "b")
	server, err := Server(certA, keyA)
	if err != nil {
		t.Fatal(err)
	}
	trusting, err := Client(false, certA) // --tls-ca implies --tls
	if err != nil || trusting == nil {
		t.Fatalf("Client with a CA: %v, %v", trusting, err)
	}
	if err := handshake(t, server, trusting); err != nil {
		t.Errorf("a client that trusts the CA: %v", err)
	}
	other, err := Client(true, certB)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, server, other); err == nil {
		t.Error("a client that trusts another CA was let through")
	}
	if _, err := Client(true, keyA); err == nil {
		t.Error("a --tls-ca file with no certificate was accepted")
	}
	if c, err := Client(false, ""); c != nil || err != nil {
		t.Errorf("no TLS: got %v, %v", c, err)
	}
}

func TestPinnedAcceptsExactlyItsOwnCertificate(t *testing.T) {
	dir := t.TempDir()
	certA, keyA := selfSigned(t, dir, "a")
	certB, keyB := selfSigned(t, dir, "b")
	a, err := Server(certA, keyA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Server(certB, keyB)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, a, Pinned(a)); err != nil {
		t.Errorf("pinned to its own certificate: %v", err)
	}
	if err := handshake(t, b, Pinned(a)); err == nil {
		t.Error("pinned to one certificate, accepted another")
	}
	if Pinned(nil) != nil {
		t.Error("no server TLS: Pinned should be plain TCP (nil)")
	}
}
