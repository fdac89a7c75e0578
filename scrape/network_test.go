package scrape

import (
	"context"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"p2pfault/netenv"
)

// oneHost is a Network that knows one host the OS does not, dialling a
// real loopback address for it; a scraper that dialled past its Network
// could not reach the name at all.
type oneHost struct {
	name, real string
	dials      atomic.Int32
}

func (n *oneHost) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

func (n *oneHost) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	n.dials.Add(1)
	if address != n.name {
		return nil, &net.AddrError{Err: "no such virtual host", Addr: address}
	}
	return netenv.OS{}.DialContext(ctx, network, n.real)
}

// TestScraperDialsThroughItsNetwork: with a Network in its Config, the
// scraper's own client connects through it and reads the engine's series.
func TestScraperDialsThroughItsNetwork(t *testing.T) {
	u, err := url.Parse(serve(t, text("vllm:num_requests_running 3\n")))
	if err != nil {
		t.Fatal(err)
	}
	nw := &oneHost{name: "decoder.virtual:80", real: u.Host}
	s, err := New(Config{
		Targets:  []Target{{Name: "decoder", URL: "http://decoder.virtual"}},
		Interval: 10 * time.Millisecond, Network: nw,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	runUntil(t, s, rec, func() bool { return len(rec.of("decoder", KindScraped)) > 0 })
	if got := rec.of("decoder", KindScraped); len(got) == 0 {
		t.Fatalf("no scrape through the Network; failures: %+v", rec.of("decoder", KindFailed))
	}
	if nw.dials.Load() == 0 {
		t.Fatal("the scraper never dialled through its Network")
	}
}
