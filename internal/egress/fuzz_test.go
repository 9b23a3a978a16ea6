package egress

import (
	"context"
	"net/netip"
	"testing"
)

// inDenyTable scans the tables directly, unmapping IPv4-mapped addresses
// and reading the IPv4 address out of NAT64 and 6to4 ones: an independent
// statement of what denied must refuse.
func inDenyTable(a netip.Addr) bool {
	a = a.WithZone("")
	v4 := []netip.Addr{}
	if a.Is4() {
		v4 = append(v4, a)
	}
	if a.Is4In6() {
		v4 = append(v4, a.Unmap())
	}
	b := a.As16()
	if a.Is6() && nat64.Contains(a) {
		v4 = append(v4, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	if a.Is6() && sixToFour.Contains(a) {
		v4 = append(v4, netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	for _, x := range v4 {
		for _, s := range deny4 {
			if s.prefix.Contains(x) {
				return true
			}
		}
	}
	if a.Is6() && !a.Is4In6() {
		for _, s := range deny6 {
			if s.prefix.Contains(a) {
				return true
			}
		}
	}
	return false
}

// answer is a resolver that answers every name with one address.
type answer netip.Addr

func (r answer) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.Addr(r)}, nil
}

// FuzzEgressCheck: the checks never panic, and nothing they allow, by
// spelling, by address or by a name's answer, is in the deny table.
func FuzzEgressCheck(f *testing.F) {
	for _, seed := range []struct {
		host string
		ip   []byte
		port uint16
	}{
		{"github.com", []byte{140, 82, 112, 3}, 443}, {"127.0.0.1", []byte{127, 0, 0, 1}, 80},
		{"2130706433", []byte{10, 0, 0, 1}, 9418}, {"0x7f.1", []byte{100, 64, 0, 1}, 22},
		{"0177.0.0.1", []byte{169, 254, 169, 254}, 80}, {"127.1", []byte{0, 0, 0, 0}, 443},
		{"[::ffff:127.0.0.1]", netip.MustParseAddr("::ffff:127.0.0.1").AsSlice(), 443},
		{"[64:ff9b::7f00:1]", netip.MustParseAddr("64:ff9b::7f00:1").AsSlice(), 443},
		{"[2002:7f00:1::1]", netip.MustParseAddr("2002:7f00:1::1").AsSlice(), 443},
		{"[::7f00:1]", netip.MustParseAddr("::7f00:1").AsSlice(), 443},
		{"a.localhost", netip.MustParseAddr("2001:db8::1").AsSlice(), 443},
		{"github.com.", netip.MustParseAddr("2606:4700::1111").AsSlice(), 443},
		{"[fe80::1%eth0]", netip.MustParseAddr("fe80::1").AsSlice(), 443},
		{"intranet", []byte{192, 168, 1, 1}, 6379}, {"0", []byte{255, 255, 255, 255}, 25},
	} {
		f.Add(seed.host, seed.ip, seed.port)
	}
	strict := Default(false)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, host string, ip []byte, port uint16) {
		if h, err := strict.checkHost(host); err == nil {
			if h.addr.IsValid() && inDenyTable(h.addr) {
				t.Fatalf("host %q allowed as %s, which the deny table holds", host, h.addr)
			}
			if !h.addr.IsValid() && (h.name == "" || endsInNumber(h.name)) {
				t.Fatalf("host %q allowed as the name %q", host, h.name)
			}
		}
		_ = strict.CheckURL("http://" + host + "/a/b")
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		if strict.CheckAddr(a, int(port)) == nil && inDenyTable(a) {
			t.Fatalf("address %s allowed, but the deny table holds it", a)
		}
		d := &Dialer{Policy: strict, Resolver: answer(a)}
		if addrs, err := d.Resolve(ctx, "name.example.org", int(port)); err == nil {
			for _, got := range addrs {
				if inDenyTable(got) {
					t.Fatalf("a name answered %s was allowed, but the deny table holds it", got)
				}
			}
		}
	})
}
