package tlsconf

import (
	"context"
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

	"github.com/gitfleet/gitfleet/internal/testnet"
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

// SpeaksTLS tells a TLS listener (one that asks for a client certificate,
// too) from a server that speaks something else, and from a closed port.
func TestSpeaksTLSTellsATLSServerFromAnother(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "server")
	conf, err := Server(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(ln net.Listener, handle func(net.Conn)) string {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); handle(c) }()
			}
		}()
		return ln.Addr().String()
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	handshake := func(c net.Conn) { _ = c.(*tls.Conn).Handshake() }
	// A server that refuses the probe with an alert (TLS 1.2: before the
	// client's handshake ends) speaks TLS too.
	strict := conf.Clone()
	strict.ClientAuth, strict.MaxVersion = tls.RequireAnyClientCert, tls.VersionTLS12
	tlsAddr := serve(tls.NewListener(listen(), conf), handshake)
	strictAddr := serve(tls.NewListener(listen(), strict), handshake)
	// A server of another protocol: it answers a line and hangs up.
	plainAddr := serve(listen(), func(c net.Conn) { _, _ = c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n")) })
	closedAddr := testnet.Addr(t) // handed out, never bound

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for addr, want := range map[string]bool{tlsAddr: true, strictAddr: true, plainAddr: false, closedAddr: false} {
		if got := SpeaksTLS(ctx, addr); got != want {
			t.Errorf("SpeaksTLS(%s) = %v, want %v", addr, got, want)
		}
	}
}
