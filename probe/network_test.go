package probe_test

import (
	"context"
	"net"
	"net/url"
	"sync"
	"testing"

	"p2pfault/netenv"
)

// aliasNet is a Network that knows hosts the OS does not: each alias
// dials a real loopback address. A probe that dialled past its Network
// could not reach an alias at all.
type aliasNet struct {
	mu     sync.Mutex
	alias  map[string]string // "decoder.virtual:80" -> "127.0.0.1:NNNN"
	dialed map[string]int
}

func (n *aliasNet) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

func (n *aliasNet) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	real, ok := n.alias[address]
	n.dialed[address]++
	n.mu.Unlock()
	if !ok {
		return nil, &net.AddrError{Err: "no such virtual host", Addr: address}
	}
	return netenv.OS{}.DialContext(ctx, network, real)
}

// alias gives raw (an http URL on loopback) a name only n resolves.
func (n *aliasNet) aliasOf(t *testing.T, name, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.alias[name+":80"] = u.Host
	n.mu.Unlock()
	return "http://" + name
}

// TestProbeDialsThroughItsNetwork: with a Network in its Config, every
// seed and pull connects through it (to hosts only it knows), and the
// trial is the same hit it is on the OS's network.
func TestProbeDialsThroughItsNetwork(t *testing.T) {
	c := newFakeCluster(t, 1)
	nw := &aliasNet{alias: map[string]string{}, dialed: map[string]int{}}
	cfg := c.config()
	cfg.DecoderURL = nw.aliasOf(t, "decoder.virtual", cfg.DecoderURL)
	cfg.Sources[0].URL = nw.aliasOf(t, "source-0.virtual", cfg.Sources[0].URL)
	cfg.Network = nw
	s := oneTrial(t, cfg)
	if s.SeedStatus != 200 || !s.Hit() {
		t.Fatalf("trial through the virtual names: %+v, want an ok hit", s)
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.dialed["decoder.virtual:80"] == 0 || nw.dialed["source-0.virtual:80"] == 0 {
		t.Fatalf("dials through the Network: %v, want the decoder and source-0", nw.dialed)
	}
}
