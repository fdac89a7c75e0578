package relay

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"p2pfault/sim/wire"
	"p2pfault/zmtp"
)

// BenchmarkAddedLatency is the link's cost per message on loopback TCP: a
// lookup of 16 keys from a DEALER to a ROUTER that echoes it back, round
// trips timed directly and through the link (each message then crosses it
// twice: parsed, summarized, asked of a fault, queued, written). The
// metrics are the added time per message, p50 and p99 (half the
// difference of the round trips' quantiles), and the round trips'.
func BenchmarkAddedLatency(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r := zmtp.NewRouter(ln, zmtp.Options{})
	defer r.Close()
	go func() {
		for {
			id, p, err := r.Recv(context.Background())
			if err != nil {
				return
			}
			r.Send(id, p)
		}
	}()
	l, err := New(Config{Name: "bench", Decoder: "127.0.0.1:1", Source: ln.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	l.SetFault(func(Message) Action { return Action{} })
	msg, err := wire.Encode(wire.Message{Type: wire.TypeLookup, KVRequestID: "bench", Keys: wire.KeysOf(make([]uint64, 16))})
	if err != nil {
		b.Fatal(err)
	}
	roundTrips := func(addr string, n int) []time.Duration {
		d := zmtp.NewDealer(zmtp.Options{Identity: []byte("127.0.0.1:1")})
		defer d.Close()
		d.Connect(addr)
		out := make([]time.Duration, 0, n)
		for i := 0; i < n+100; i++ { // the first 100 warm up
			start := time.Now()
			d.Send(msg)
			if _, err := d.Recv(context.Background()); err != nil {
				b.Fatal(err)
			}
			if i >= 100 {
				out = append(out, time.Since(start))
			}
		}
		slices.Sort(out)
		return out
	}
	b.ResetTimer()
	direct := roundTrips(ln.Addr().String(), b.N)
	linked := roundTrips(l.SourceAddr(), b.N)
	b.StopTimer()
	q := func(s []time.Duration, p float64) time.Duration { return s[int(float64(len(s)-1)*p)] }
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(q(direct, 0.5)), "direct-rtt-p50-ms")
	b.ReportMetric(ms(q(linked, 0.5)), "link-rtt-p50-ms")
	b.ReportMetric(ms(q(linked, 0.5)-q(direct, 0.5))/2, "added-p50-ms")
	b.ReportMetric(ms(q(linked, 0.99)-q(direct, 0.99))/2, "added-p99-ms")
}
