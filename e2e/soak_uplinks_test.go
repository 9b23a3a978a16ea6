package e2e

import (
	"fmt"
	"net"
	"testing"
)

// soakUpstreamHost is the name the catalog gives the upstream git server.
// Each node resolves it (--dns-server) to a loopback address of its own,
// where its own link to the upstreams listens, all on one port: the
// repositories' keys are the same for every node, and yet the test can cut
// or slow one node's path to the upstreams while the others fetch.
const soakUpstreamHost = "upstreams.gitfleet-test.net"

// soakUpstreamIP is node j's loopback address for the upstreams.
func soakUpstreamIP(j int) string { return fmt.Sprintf("127.0.0.%d", 10+j) }

// newUpstreamLinks starts one link per node, node j's on soakUpstreamIP(j)
// and one port shared by all, each forwarding to target (the link that
// every path to the upstreams shares), and one DNS server per node that
// answers soakUpstreamHost with the node's address. It returns the links
// and the DNS servers by node, and the port.
func newUpstreamLinks(t testing.TB, nodes []string, target string) (ls map[string]*link, dns map[string]string, port int) {
	t.Helper()
	for try := 0; try < 20; try++ {
		lns, err := listenAll(len(nodes))
		if err != nil {
			continue // a port taken on one of the addresses: another one
		}
		port = lns[0].Addr().(*net.TCPAddr).Port
		ls, dns = map[string]*link{}, map[string]string{}
		for j, n := range nodes {
			ls[n] = linkOn(t, n+"-upstream", lns[j], target)
			dns[n] = startDNS(t, map[string]string{soakUpstreamHost: soakUpstreamIP(j)})
		}
		return ls, dns, port
	}
	t.Fatalf("no port free on %s to %s", soakUpstreamIP(0), soakUpstreamIP(len(nodes)-1))
	return nil, nil, 0
}

// listenAll listens on soakUpstreamIP(0) at a port the kernel picks and on
// the same port of the n-1 next addresses.
func listenAll(n int) ([]net.Listener, error) {
	first, err := net.Listen("tcp", net.JoinHostPort(soakUpstreamIP(0), "0"))
	if err != nil {
		return nil, err
	}
	lns := []net.Listener{first}
	port := first.Addr().(*net.TCPAddr).Port
	for j := 1; j < n; j++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", soakUpstreamIP(j), port))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}
