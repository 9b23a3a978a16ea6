package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// Every range of the deny table, by an address inside it, and the
// addresses that embed an IPv4 address, by the IPv4 address they embed.
func TestDenyTableRefusesEverySpecialPurposeRange(t *testing.T) {
	for _, tc := range []struct{ addr, why string }{
		{"0.0.0.0", "this network"}, {"0.1.2.3", "this network"},
		{"10.1.2.3", "private"}, {"100.64.0.1", "carrier-grade NAT"}, {"100.127.255.254", "carrier-grade NAT"},
		{"127.0.0.1", "loopback"}, {"127.255.255.254", "loopback"},
		{"169.254.169.254", "link-local"}, {"172.16.0.1", "private"}, {"172.31.255.255", "private"},
		{"192.0.0.8", "IETF"}, {"192.0.2.1", "TEST-NET-1"}, {"192.88.99.1", "6to4 relay"},
		{"192.168.1.1", "private"}, {"198.18.0.1", "benchmarking"}, {"198.19.255.255", "benchmarking"},
		{"198.51.100.7", "TEST-NET-2"}, {"203.0.113.9", "TEST-NET-3"},
		{"224.0.0.1", "multicast"}, {"239.255.255.250", "multicast"}, {"240.0.0.1", "reserved"},
		{"255.255.255.255", "reserved"}, // inside 240/4 as well
		{"::", "unspecified"}, {"::1", "loopback"},
		{"::ffff:127.0.0.1", "IPv4-mapped loopback"}, {"::ffff:10.0.0.1", "IPv4-mapped private"},
		{"::ffff:169.254.169.254", "IPv4-mapped link-local"},
		{"::7f00:1", "IPv4-compatible"}, {"::a00:1", "IPv4-compatible"},
		{"64:ff9b::7f00:1", "NAT64 of loopback"}, {"64:ff9b::a9fe:a9fe", "NAT64 of link-local"},
		{"64:ff9b::c0a8:101", "NAT64 of private"}, {"64:ff9b:1::1", "local-use NAT64"},
		{"100::1", "discard"}, {"2001::1", "Teredo"}, {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:100::1", "IETF protocol"}, {"2001:db8::1", "documentation"}, {"3fff::1", "documentation"},
		{"2002:7f00:1::1", "6to4 of loopback"}, {"2002:a00:1::", "6to4 of private"},
		{"2002:c0a8:101::1", "6to4 of private"},
		{"5f00::1", "segment routing"}, {"fc00::1", "unique local"}, {"fd12:3456::1", "unique local"},
		{"fe80::1", "link-local"}, {"febf::1", "link-local"}, {"fec0::1", "site-local"},
		{"ff02::1", "multicast"}, {"ff0e::1", "multicast"},
		{"4000::1", "outside the global unicast"}, {"::2:3:4", "outside the global unicast"},
	} {
		r := denied(netip.MustParseAddr(tc.addr))
		if r == "" || !strings.Contains(r, tc.why) {
			t.Errorf("denied(%s) = %q, want a reason naming %q", tc.addr, r, tc.why)
		}
	}
}

func TestDenyTableAllowsGlobalUnicast(t *testing.T) {
	for _, a := range []string{"1.1.1.1", "8.8.8.8", "140.82.112.3", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "192.0.1.1", "198.17.255.255", "198.20.0.0", "223.255.255.255",
		"::ffff:140.82.112.3", "64:ff9b::8c52:7003", "2002:8c52:7003::1", "2001:4860:4860::8888",
		"2606:4700::1111", "2a00:1450:4001::1"} {
		if r := denied(netip.MustParseAddr(a)); r != "" {
			t.Errorf("denied(%s) = %q, want allowed (a public address)", a, r)
		}
	}
}

func TestHostSpellings(t *testing.T) {
	p := Default(false)
	for _, tc := range []struct{ host, why string }{
		{"2130706433", "non-canonical IPv4"}, {"0x7f000001", "non-canonical IPv4"},
		{"0x7f.1", "non-canonical IPv4"}, {"0177.0.0.1", "non-canonical IPv4"},
		{"0177.1", "non-canonical IPv4"}, {"127.1", "non-canonical IPv4"}, {"127.0.1", "non-canonical IPv4"},
		{"0", "non-canonical IPv4"}, {"0x0", "non-canonical IPv4"}, {"010.0.0.1", "non-canonical IPv4"},
		{"127.0.0.1.", "non-canonical IPv4"}, {"1.2.3.4.5", "non-canonical IPv4"}, {"example.0x1f", "non-canonical IPv4"},
		{"127.0.0.1", "loopback"}, {"[::1]", "loopback"}, {"[::ffff:7f00:1]", "IPv4-mapped loopback"},
		{"[fe80::1%eth0]", "scoped"}, {"169.254.169.254", "link-local"},
		{"localhost", "localhost"}, {"LOCALHOST", "localhost"}, {"a.localhost", "localhost"},
		{"evil.localhost", "localhost"}, {"github.com.", "ends in a dot"}, {"localhost.", "ends in a dot"},
		{"intranet", "single-label"}, {"nas", "single-label"}, {"router.local", ".local"},
		{"git.internal", ".internal"}, {"box.home.arpa", ".home.arpa"}, {"x.onion", ".onion"},
		{"", "no host"}, {"a..b", "valid host"}, {"-a.com", "valid host"}, {"a b.com", "valid host"},
	} {
		err := p.CheckHost(tc.host)
		var be *BlockedError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.why) || !strings.HasPrefix(err.Error(), "blocked destination") {
			t.Errorf("CheckHost(%q) = %v, want a blocked destination naming %q", tc.host, err, tc.why)
		}
	}
	for _, h := range []string{"github.com", "GitHub.com", "gitee.com", "git.kernel.org", "140.82.112.3",
		"[2606:4700::1111]", "my_host.example.org", "0x.example.com"} {
		if err := p.CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q) = %v, want allowed", h, err)
		}
	}
}

func TestOperatorAllowList(t *testing.T) {
	p, err := New(Config{Allow: []string{"10.1.0.0/16", "127.0.0.1", "nas", "*.corp.example", "git.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"10.1.2.3", "127.0.0.1", "[::ffff:127.0.0.1]", "nas", "git.corp.example", "git.internal", "nas."} {
		if err := p.CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q) = %v, want allowed by the operator", h, err)
		}
	}
	for _, h := range []string{"10.2.0.1", "127.0.0.2", "corp.example", "localhost", "127.1", "other.internal"} {
		if err := p.CheckHost(h); err == nil {
			t.Errorf("CheckHost(%q) allowed, want refused (not in the allow list)", h)
		}
	}
	// An allowed entry permits any port; others only the schemes' own.
	if err := p.CheckURL("http://10.1.2.3:6379/a/b"); err != nil {
		t.Errorf("allowed range, odd port: %v", err)
	}
	if err := p.CheckAddr(netip.MustParseAddr("10.1.2.3"), 25); err != nil {
		t.Errorf("allowed range, port 25: %v", err)
	}
	for _, u := range []string{"http://example.org:25/a", "https://example.org:6379/a", "git://example.org/a",
		"ssh://git@example.org/a", "ftp://example.org/a", "http://127.1/a"} {
		if err := p.CheckURL(u); !IsBlocked(err) {
			t.Errorf("CheckURL(%q) = %v, want blocked", u, err)
		}
	}
	for _, u := range []string{"https://example.org/a", "http://example.org:80/a", "https://example.org:443/a"} {
		if err := p.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want allowed", u, err)
		}
	}
	q, err := New(Config{Schemes: []string{"https", "git"}, Ports: []int{8443}})
	if err != nil {
		t.Fatal(err)
	}
	for u, ok := range map[string]bool{"git://example.org/a": true, "https://example.org:8443/a": true,
		"http://example.org/a": false, "git://example.org:9419/a": false, "https://example.org:9418/a": true} {
		if err := q.CheckURL(u); (err == nil) != ok {
			t.Errorf("schemes https,git ports 8443: CheckURL(%q) = %v, want allowed %v", u, err, ok)
		}
	}
	if q.Schemes() != "https:git" {
		t.Errorf("Schemes() = %q", q.Schemes())
	}
	for _, bad := range [][]string{{"127.1"}, {"a b"}, {""}} {
		if _, err := New(Config{Allow: bad}); err == nil {
			t.Errorf("New(Allow: %q) accepted, want an error", bad)
		}
	}
}

func TestAllowPrivateShorthand(t *testing.T) {
	p := Default(true)
	for _, h := range []string{"127.0.0.1", "10.0.0.1", "192.168.1.1", "[::1]", "localhost", "a.localhost", "[fd00::1]"} {
		if err := p.CheckHost(h); err != nil {
			t.Errorf("--allow-private-upstreams: CheckHost(%q) = %v, want allowed", h, err)
		}
	}
	if err := p.CheckURL("http://127.0.0.1:34567/a/b"); err != nil {
		t.Errorf("--allow-private-upstreams: any port on loopback: %v", err)
	}
	// Still refused: spellings that are never canonical, and what is neither loopback nor private.
	for _, h := range []string{"127.1", "2130706433", "0", "198.18.0.1", "224.0.0.1", "[64:ff9b::7f00:1]"} {
		if err := p.CheckHost(h); err == nil {
			t.Errorf("--allow-private-upstreams: CheckHost(%q) allowed, want refused", h)
		}
	}
}

func TestLocalOnlyNameAgreesWithThePolicy(t *testing.T) {
	p := Default(false)
	for _, name := range []string{"localhost", "a.localhost", "printer.local", "svc.internal", "nas.home.arpa",
		"home.arpa", "r.lan", "x.localdomain", "w.intranet", "a.invalid", "a.test", "a.example", "x.onion", "x.alt",
		"github.com", "arpa.example.org", "local.example.org", "gitee.com", "x.arpa", "testing.dev"} {
		err := p.CheckHost(name)
		refused := err != nil && strings.Contains(err.Error(), "local")
		if got := LocalOnlyName([]byte(name)); got != refused {
			t.Errorf("LocalOnlyName(%q) = %v, but the policy says %v", name, got, err)
		}
	}
}
