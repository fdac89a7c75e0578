package doctor

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"p2pfault/event"
	"p2pfault/runner"
)

// listen holds a loopback port for the test.
func listen(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// freePort is a loopback port nobody holds now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// portCluster is one source and a decoder on the given ports.
func portCluster(src, srcP2P, dec, decP2P int, fixed bool) Cluster {
	return Cluster{Label: "main", Specs: []runner.Spec{
		{Name: "source-0", Role: event.RoleSource, HTTPPort: src, P2PPort: srcP2P, FixedHTTP: fixed, FixedP2P: fixed},
		{Name: "decoder", Role: event.RoleDecoder, HTTPPort: dec, P2PPort: decP2P, FixedHTTP: fixed, FixedP2P: fixed},
	}}
}

func TestPortsPassWhenEveryPortIsFree(t *testing.T) {
	a, b, c, d := freePort(t), freePort(t), freePort(t), freePort(t)
	rs := Ports(System(), []Cluster{portCluster(a, b, c, d, true)})
	want := fmt.Sprintf("free: source-0 HTTP %d, source-0 P2P %d, decoder HTTP %d, decoder P2P %d", a, b, c, d)
	if len(rs) != 1 || !rs[0].OK || rs[0].Found != want {
		t.Errorf("got\n%swant ✓ ports: %s", lines(rs), want)
	}
}

func TestPortsFailOnATakenFixedPortNamingItsHolder(t *testing.T) {
	taken := listen(t)
	rs := Ports(System(), []Cluster{portCluster(freePort(t), freePort(t), taken, freePort(t), true)})
	if len(rs) != 1 || rs[0].OK {
		t.Fatalf("want one failure:\n%s", lines(rs))
	}
	// The holder is this test process, found through /proc as the runner's
	// own error finds it.
	if want := fmt.Sprintf("fixed decoder HTTP port %d is in use by pid %d (", taken, os.Getpid()); !strings.HasPrefix(rs[0].Found, want) {
		t.Errorf("found %q, want it to start %q", rs[0].Found, want)
	}
	if !strings.HasSuffix(rs[0].Fix, "--decoder-port") {
		t.Errorf("fix %q: want the flag that fixed it", rs[0].Fix)
	}
}

func TestPortsPassOnATakenDefaultPortTheRunWillMove(t *testing.T) {
	taken := listen(t)
	rs := Ports(System(), []Cluster{portCluster(taken, freePort(t), freePort(t), freePort(t), false)})
	if len(rs) != 1 || !rs[0].OK {
		t.Fatalf("want a pass:\n%s", lines(rs))
	}
	if want := fmt.Sprintf("taken, so the run binds free ones instead: source-0 HTTP %d, in use by pid %d", taken, os.Getpid()); !strings.Contains(rs[0].Found, want) {
		t.Errorf("found %q, want it to hold %q", rs[0].Found, want)
	}
}

func TestPortsOfAClusterWithFreePortsAreNotBound(t *testing.T) {
	taken := listen(t)
	c := portCluster(taken, taken+1, taken+2, taken+3, false)
	c.Config.FreePorts = true
	h := System()
	h.PortFree = func(int) bool { t.Error("a port of a --free-ports cluster was probed"); return false }
	rs := Ports(h, []Cluster{c})
	if len(rs) != 1 || !rs[0].OK || rs[0].Found != "every port not fixed comes from a pool of free ports" {
		t.Errorf("got\n%s", lines(rs))
	}
}

// TestPortsCheckEveryRanksP2PPort: a source of two data-parallel ranks
// binds base and base+1; a taken base+1 fixed is a failure naming the rank.
func TestPortsCheckEveryRanksP2PPort(t *testing.T) {
	base := listenPair(t)
	c := Cluster{Label: "main", Specs: []runner.Spec{
		{Name: "source-0", Role: event.RoleSource, HTTPPort: freePort(t), P2PPort: base, Ranks: 2, FixedHTTP: true, FixedP2P: true},
	}}
	rs := Ports(System(), []Cluster{c})
	if len(rs) != 1 || rs[0].OK || !strings.Contains(rs[0].Found, fmt.Sprintf("fixed source-0/rank1 P2P port %d is in use", base+1)) {
		t.Errorf("rank 1's port taken:\n%s", lines(rs))
	}
}

// listenPair is a free port whose next port this test holds.
func listenPair(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := freePort(t)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		if err != nil {
			continue
		}
		t.Cleanup(func() { l.Close() })
		return p
	}
	t.Fatal("no free port with its next one free in 100 tries")
	return 0
}
