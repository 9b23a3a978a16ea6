// Package testnet gives tests the addresses of servers that must bind a port
// by themselves: another process, or a library that takes an address rather
// than a listener.
//
// The usual trick, listening on port 0 and closing the listener, hands out a
// port from the kernel's ephemeral range. Until the server binds it, any
// outgoing connection on the machine may take the same port as its source
// port, and the server then fails with "address already in use". On a busy CI
// machine that happens. Addr hands out ports below that range instead, which
// only an explicit bind can take.
package testnet

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the first port Addr hands out: its ports lie between it and the
// start of the ephemeral range (32768 by default on Linux), clear of the
// well-known ports and of those most local services listen on.
const lowest = 20000

// ports is the one process-wide record of the ports handed out, so that two
// tests of one binary never get the same port while neither has bound it yet.
var ports struct {
	sync.Mutex
	next int // the next candidate
	lo   int // the first port of the ephemeral range
	init bool
}

// Addr returns "127.0.0.1:PORT" for a port that was free a moment ago, that
// no other call in this process has returned, and that the kernel does not
// give to outgoing connections. It fails the test when no such port is left.
func Addr(t testing.TB) string {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if !ports.init {
		ports.lo = ephemeralStart()
		// Start each process somewhere else, so that test binaries running at
		// the same time rarely walk over the same ports.
		ports.next = lowest + rand.IntN(max(ports.lo-lowest, 1))
		ports.init = true
	}
	if ports.lo <= lowest {
		return kernelChosen(t) // no room below the range: the old way
	}
	for tries := 0; tries < ports.lo-lowest; tries++ {
		p := ports.next
		ports.next++
		if ports.next >= ports.lo {
			ports.next = lowest
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // bound by someone else
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return addr
	}
	t.Fatalf("testnet: no free port in [%d, %d)", lowest, ports.lo)
	return ""
}

// ephemeralStart reads the first port of the kernel's range of source ports,
// and assumes Linux's default where it cannot (other systems start higher).
func ephemeralStart() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return linuxDefault
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return linuxDefault
	}
	return lo
}

func kernelChosen(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
