package testutil

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// FreePortsOn returns n distinct ports on ip that were free a moment ago,
// chosen below the ephemeral range (32768 and up on Linux): a port the
// kernel hands out as ephemeral could be taken, between this probe and a
// node's listen or across its restarts, by any outgoing connection from
// ip, and nodes dial from their own addresses (seen: "bind: address
// already in use" at a cluster's start, a CONTROLLER port taken before
// its node bound it).
func FreePortsOn(t testing.TB, ip string, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free ports below 32768 on %s", n, ip)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(20000+rand.IntN(12000))))
		if err != nil {
			continue
		}
		lns = append(lns, ln) // held until all are found: n distinct ports
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
