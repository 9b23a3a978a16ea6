package testnet

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrGivesDistinctBindablePortsOutsideTheEphemeralRange(t *testing.T) {
	lo := ephemeralStart()
	if lo <= lowest {
		t.Skipf("the ephemeral range starts at %d: Addr falls back to the kernel's choice", lo)
	}
	seen := map[string]bool{}
	for range 200 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		if p < lowest || p >= lo {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, lo)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s cannot be bound: %v", addr, err)
		}
		ln.Close()
	}
	// A port bound by someone else is skipped: hold the next candidate.
	ports.Lock()
	held := ports.next
	ports.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held)))
	if err != nil {
		t.Skipf("port %d is taken already: %v", held, err)
	}
	defer ln.Close()
	if got := Addr(t); got == ln.Addr().String() {
		t.Fatalf("Addr returned %s, which is bound", got)
	}
}
