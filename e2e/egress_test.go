package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// dnsServer is a tiny DNS server on 127.0.0.1 that the test controls: it
// answers A questions for its names and nothing else.
type dnsServer struct {
	conn    *net.UDPConn
	answers map[string]netip.Addr // "name." -> IPv4
}

func startDNS(t testing.TB, answers map[string]string) string {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsServer{conn: conn, answers: map[string]netip.Addr{}}
	for name, a := range answers {
		d.answers[name+"."] = netip.MustParseAddr(a)
	}
	go d.serve()
	t.Cleanup(func() { conn.Close() })
	return conn.LocalAddr().String()
}

func (d *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		var q dnsmessage.Message
		if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
			continue
		}
		question := q.Questions[0]
		a, known := d.answers[strings.ToLower(question.Name.String())]
		resp := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true,
			RecursionDesired: q.RecursionDesired, RecursionAvailable: true}, Questions: q.Questions}
		switch {
		case !known:
			resp.RCode = dnsmessage.RCodeNameError
		case question.Type == dnsmessage.TypeA:
			resp.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1},
				Body:   &dnsmessage.AResource{A: a.As4()},
			}}
		}
		out, err := resp.Pack()
		if err == nil {
			_, _ = d.conn.WriteToUDP(out, from)
		}
	}
}

// listenCounting listens on host:0 and counts the connections it gets.
func listenCounting(t *testing.T, host string) (port string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s here: %v", host, err)
	}
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, conns
}

// A public mirror that allows only 127.0.0.1 (standing for the internet):
// an upstream spelled as a non-canonical loopback address, or named by a
// name whose DNS answer is inside, is refused with "blocked destination"
// whether it comes from the catalog or the API, and nothing connects to
// it; a name that answers an allowed address is mirrored as usual.
func TestEgressRefusesInternalDestinations(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	f := newFleet(t)
	repos := seq(0, 3)
	for _, i := range repos {
		if err := f.up.Create(f.name(i), []string{"main"}, []string{"v1"}); err != nil {
			t.Fatal(err)
		}
	}
	loopPort, loopConns := listenCounting(t, "127.0.0.1")     // what 2130706433 and 0x7f.1 mean
	insidePort, insideConns := listenCounting(t, "127.0.0.2") // what the resolver says inside.* is
	upURL, _ := url.Parse(f.up.URL)
	dns := startDNS(t, map[string]string{"inside.gitfleet-test.net": "127.0.0.2", "up.gitfleet-test.net": "127.0.0.1"})

	f.writeCatalog(repos, "the fleet's upstreams")
	f.writeFile("lists/hostile.list", fmt.Sprintf("http://2130706433:%s/a/decimal.git\nhttp://inside.gitfleet-test.net:%s/a/inside.git\n",
		loopPort, insidePort))
	if err := gittest.Git(f.catalog, "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if err := gittest.Git(f.catalog, "commit", "-q", "-m", "hostile entries"); err != nil {
		t.Fatal(err)
	}
	up := start(t, "up", "up", "--data", filepath.Join(t.TempDir(), "up"), "--catalog", f.catalog,
		"--http", f.http, "--grpc", freeAddr(t), "--tunnel", freeAddr(t), "--join-token", f.token, "--api-token", apiToken,
		"--egress-allow", "127.0.0.1/32", "--dns-server", dns,
		// The test's ports are not 80 or 443: allow them, so that what refuses
		// a name is its answer.
		"--egress-ports", insidePort, "--egress-ports", upURL.Port(),
		"--catalog-interval", "1s", "--max-interval", "2s", "--min-interval", "500ms")
	eventually(t, 60*time.Second, "the allowed upstreams are served", func() error { return f.servedLikeUpstream(repos) })

	insideKey := "inside.gitfleet-test.net:" + insidePort + "/a/inside"
	eventually(t, 60*time.Second, "the catalog's name that answers inside fails as a blocked destination", func() error {
		all, err := apiReposAs(f.base, apiToken) // the operator sees the details
		if err != nil {
			return err
		}
		if r := all[insideKey]; !strings.Contains(r.Error, "blocked destination") || !strings.Contains(r.Error, "resolves to 127.0.0.2") {
			return fmt.Errorf("%s: state %q, error %q", insideKey, r.State, r.Error)
		}
		return nil
	})
	if up.count("blocked destination: 2130706433") == 0 {
		t.Errorf("the catalog's decimal spelling of 127.0.0.1 was not refused as a blocked destination")
	}
	if all, _ := apiRepos(f.base); len(all) != len(repos)+2 { // + the missing upstream + inside
		t.Errorf("the API lists %d repositories, want %d (the decimal spelling is not one)", len(all), len(repos)+2)
	}

	api := f.base + "/api/v1/repos"
	for _, u := range []string{
		"http://0x7f.1:" + loopPort + "/b/hex.git",
		"http://2130706433:" + loopPort + "/b/decimal.git",
		"http://0177.0.0.1:" + loopPort + "/b/octal.git",
		"http://127.1:" + loopPort + "/b/short.git",
		"http://inside.gitfleet-test.net:" + insidePort + "/b/inside.git",
		"http://127.0.0.2:" + insidePort + "/b/literal.git",
		"http://localhost:" + loopPort + "/b/localhost.git",
	} {
		var body struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		code := call(t, "POST", api, apiToken, strings.NewReader(fmt.Sprintf(`{"url": %q}`, u)), &body)
		if code != 403 || body.Code != "blocked_destination" || !strings.Contains(body.Error, "blocked destination") {
			t.Errorf("POST %s: %d %q %q, want 403 blocked_destination", u, code, body.Code, body.Error)
		}
	}
	// A name that the resolver answers with an allowed address works.
	named := "http://up.gitfleet-test.net:" + upURL.Port() + "/" + f.name(1) + ".git"
	if code := call(t, "POST", api, apiToken, strings.NewReader(fmt.Sprintf(`{"url": %q}`, named)), nil); code != 201 {
		t.Fatalf("POST %s: %d, want 201", named, code)
	}
	namedKey := "up.gitfleet-test.net:" + upURL.Port() + "/" + f.name(1)
	eventually(t, 60*time.Second, "the upstream added by an allowed name is mirrored", func() error {
		all, err := apiRepos(f.base)
		if err != nil {
			return err
		}
		if r := all[namedKey]; !r.Served || r.Error != "" {
			return fmt.Errorf("%s: %+v", namedKey, r)
		}
		return nil
	})
	if n := loopConns.Load() + insideConns.Load(); n != 0 {
		t.Errorf("refused destinations got %d connections (127.0.0.1:%s %d, 127.0.0.2:%s %d), want none",
			n, loopPort, loopConns.Load(), insidePort, insideConns.Load())
	}
}
