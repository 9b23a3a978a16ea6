// Package etcdtest starts a real, single-member etcd server inside a test
// process, on 127.0.0.1 ports of its own and a temporary data directory.
// Only tests import it: the gitfleet binary never links the etcd server.
package etcdtest

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/gitfleet/gitfleet/internal/testnet"
)

// Server is a running etcd.
type Server struct {
	etcd *embed.Etcd
	stop sync.Once
	// Endpoint is the client URL, e.g. http://127.0.0.1:40123.
	Endpoint string
}

// Start starts an etcd that stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	// etcd logs its own shutdown as errors: the tests say what matters.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, peer := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd did not become ready within 30s")
	}
	s := &Server{etcd: e, Endpoint: client.String()}
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server at once, as a crash or a network partition would
// look to its clients.
func (s *Server) Stop() { s.stop.Do(s.etcd.Close) }

// freeURL returns an http URL of a free port on 127.0.0.1, for etcd to bind.
func freeURL(t testing.TB) url.URL {
	t.Helper()
	return url.URL{Scheme: "http", Host: testnet.Addr(t)}
}
