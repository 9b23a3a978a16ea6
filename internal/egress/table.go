package egress

import "net/netip"

// special is one range of the IANA IPv4 and IPv6 special-purpose address
// registries (RFC 6890 and its updates) that an upstream may never be.
type special struct {
	prefix netip.Prefix
	name   string
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// deny4 is every IPv4 range that is not globally reachable unicast. The
// table is never modified.
var deny4 = []special{
	{mustPrefix("0.0.0.0/8"), "\"this network\" (RFC 791)"},
	{mustPrefix("10.0.0.0/8"), "private network (RFC 1918)"},
	{mustPrefix("100.64.0.0/10"), "shared address space, carrier-grade NAT (RFC 6598)"},
	{mustPrefix("127.0.0.0/8"), "loopback (RFC 1122)"},
	{mustPrefix("169.254.0.0/16"), "link-local, cloud metadata services (RFC 3927)"},
	{mustPrefix("172.16.0.0/12"), "private network (RFC 1918)"},
	{mustPrefix("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)"},
	{mustPrefix("192.0.2.0/24"), "documentation, TEST-NET-1 (RFC 5737)"},
	{mustPrefix("192.88.99.0/24"), "6to4 relay anycast, deprecated (RFC 7526)"},
	{mustPrefix("192.168.0.0/16"), "private network (RFC 1918)"},
	{mustPrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{mustPrefix("198.51.100.0/24"), "documentation, TEST-NET-2 (RFC 5737)"},
	{mustPrefix("203.0.113.0/24"), "documentation, TEST-NET-3 (RFC 5737)"},
	{mustPrefix("224.0.0.0/4"), "multicast (RFC 5771)"},
	{mustPrefix("240.0.0.0/4"), "reserved (RFC 1112)"},
	{mustPrefix("255.255.255.255/32"), "limited broadcast (RFC 919)"},
}

// deny6 is every IPv6 range that is not globally reachable unicast, after
// the forms that embed an IPv4 address were checked by that address (see
// denied). Anything outside 2000::/3, the global unicast space, is refused
// as well. The table is never modified.
var deny6 = []special{
	{mustPrefix("::/128"), "unspecified address (RFC 4291)"},
	{mustPrefix("::1/128"), "loopback (RFC 4291)"},
	{mustPrefix("::/96"), "IPv4-compatible address, deprecated (RFC 4291)"},
	{mustPrefix("64:ff9b:1::/48"), "local-use NAT64, the operator's own translator (RFC 8215)"},
	{mustPrefix("100::/64"), "discard-only (RFC 6666)"},
	{mustPrefix("2001::/32"), "Teredo tunnelling (RFC 4380)"},
	{mustPrefix("2001::/23"), "IETF protocol assignments (RFC 2928)"},
	{mustPrefix("2001:db8::/32"), "documentation (RFC 3849)"},
	{mustPrefix("3fff::/20"), "documentation (RFC 9637)"},
	{mustPrefix("5f00::/16"), "segment routing SIDs (RFC 9602)"},
	{mustPrefix("fc00::/7"), "unique local, private network (RFC 4193)"},
	{mustPrefix("fe80::/10"), "link-local (RFC 4291)"},
	{mustPrefix("fec0::/10"), "site-local, deprecated (RFC 3879)"},
	{mustPrefix("ff00::/8"), "multicast (RFC 4291)"},
}

var (
	nat64     = mustPrefix("64:ff9b::/96") // RFC 6052: the IPv4 address is the last 32 bits
	sixToFour = mustPrefix("2002::/16")    // RFC 3056: the IPv4 address is bits 16-47
	global6   = mustPrefix("2000::/3")
)

// denied returns why a is not a globally reachable unicast address, or ""
// when it is. IPv4-mapped addresses are unmapped, and the IPv4 address
// embedded in a NAT64 or 6to4 address is checked as itself.
func denied(a netip.Addr) string {
	if !a.IsValid() {
		return "not an IP address"
	}
	if a.Zone() != "" {
		return "scoped address (zone " + a.Zone() + ")"
	}
	if a.Is4In6() {
		if r := denied(a.Unmap()); r != "" {
			return "IPv4-mapped " + r
		}
		return ""
	}
	if a.Is4() {
		for _, s := range deny4 {
			if s.prefix.Contains(a) {
				return s.name
			}
		}
		return ""
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		if r := denied(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); r != "" {
			return "NAT64 of " + r
		}
		return ""
	case sixToFour.Contains(a):
		if r := denied(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); r != "" {
			return "6to4 of " + r
		}
		return ""
	}
	for _, s := range deny6 {
		if s.prefix.Contains(a) {
			return s.name
		}
	}
	if !global6.Contains(a) {
		return "outside the global unicast space 2000::/3"
	}
	return ""
}
