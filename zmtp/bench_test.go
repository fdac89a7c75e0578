package zmtp

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"p2pfault/memnet"
	"p2pfault/netenv"
	"p2pfault/sim/wire"
)

// benchNet is a network the benchmarks run on, and how to reach a
// listener's address on it.
type benchNet struct {
	name string
	cli  netenv.Network
	srv  netenv.Network
}

func benchNets() []benchNet {
	f := memnet.New(1)
	return []benchNet{
		{"memnet", f.Host("cli"), f.Host("srv")},
		{"tcp", netenv.OS{}, netenv.OS{}},
	}
}

// exchange is a request and the answer a peer gives it, as the sim's
// control channel carries them.
type exchange struct {
	name      string
	req, resp wire.Message
}

func benchExchanges() []exchange {
	keys := func(n int) []uint64 {
		k := make([]uint64, n)
		for i := range k {
			k[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
		}
		return k
	}
	hits := make([]bool, 40)
	for i := range hits {
		hits[i] = i%3 != 0
	}
	const id = "cmpl-bench-0123456789abcdef-0"
	return []exchange{
		// A lookup of a 640-token prompt in 16-token blocks: 40 keys.
		{"lookup40", wire.Message{Type: wire.TypeLookup, KVRequestID: id, Keys: wire.KeysOf(keys(40))},
			wire.Message{Type: wire.TypeLookupResp, KVRequestID: id, Keys: wire.KeysOf(keys(40)), Hits: hits}},
		// A fetch of 384 tokens (24 blocks) and its transfer_done.
		{"fetch384", wire.Message{Type: wire.TypeFetch, KVRequestID: id, Keys: wire.KeysOf(keys(24)), BlockIndexes: make([]int64, 24)},
			wire.Message{Type: wire.TypeTransferDone, KVRequestID: id, Success: true, Bytes: 24 << 16, Data: keys(24)}},
	}
}

// BenchmarkWire is one request and its answer between two engines: the
// sim's length-prefixed frames on one connection per pair (frames: a
// reader and a writer goroutine per side, as sim/engine/conn.go) against
// ZMTP laid out as vLLM's (zmtp: DEALER to the peer's ROUTER, the answer
// over the peer's DEALER to ours), the same msgpack payloads, on memnet
// and on loopback TCP. zmtp-1conn answers over the same connection (the
// ROUTER sends back), which sets the codec and sockets beside the frames
// on the same layout: what two connections a pair cost beyond the codec.
// wireB/op is the bytes both frames take on the wire; cpu-ns/op the CPU
// time the process spent per exchange (reportCPU).
func BenchmarkWire(b *testing.B) {
	for _, ex := range benchExchanges() {
		// The sim's frames before issue 38 around the same payloads.
		req, err := wire.Encode(ex.req)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := wire.Encode(ex.resp)
		if err != nil {
			b.Fatal(err)
		}
		reqF, respF := lenFrame(req), lenFrame(resp)
		for _, n := range benchNets() {
			b.Run(fmt.Sprintf("%s/%s/frames", ex.name, n.name), func(b *testing.B) {
				reportCPU(b, func() { benchFrames(b, n, reqF, respF) })
				b.ReportMetric(float64(len(reqF)+len(respF)), "wireB/op")
			})
			zmtpB := float64(len(appendFrame(nil, req, 0)) + len(appendFrame(nil, resp, 0)))
			b.Run(fmt.Sprintf("%s/%s/zmtp", ex.name, n.name), func(b *testing.B) {
				reportCPU(b, func() { benchZMTP(b, n, req, resp) })
				b.ReportMetric(zmtpB, "wireB/op")
			})
			b.Run(fmt.Sprintf("%s/%s/zmtp-1conn", ex.name, n.name), func(b *testing.B) {
				reportCPU(b, func() { benchZMTPOneConn(b, n, req, resp) })
				b.ReportMetric(zmtpB, "wireB/op")
			})
		}
	}
}

// reportCPU runs one benchmark and reports the process's CPU time per op
// (user and system, every goroutine: both ends, the runtime): on a shared
// machine ns/op also counts the time the benchmark waited for a CPU, which
// can swing a row by half between runs, while the CPU the wire spends
// stays what it is. Setup is counted too, over b.N exchanges.
func reportCPU(b *testing.B, run func()) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t0 := cpu()
	run()
	b.ReportMetric(float64(cpu()-t0)/float64(b.N), "cpu-ns/op")
}

// framesSide is one end of the sim's connection: frames written through a
// channel by a writer goroutine, read by a reader goroutine into another.
type framesSide struct {
	out chan []byte
	in  chan wire.Message
}

func newFramesSide(b *testing.B, nc net.Conn) *framesSide {
	s := &framesSide{out: make(chan []byte, 1024), in: make(chan wire.Message, 1024)}
	go func() {
		for f := range s.out {
			if _, err := nc.Write(f); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(s.in)
		br := bufio.NewReaderSize(nc, 64<<10)
		for {
			p, err := readLenFrame(br)
			if err != nil {
				return
			}
			m, err := wire.Decode(p)
			if err != nil {
				b.Error(err)
				return
			}
			s.in <- m
		}
	}()
	b.Cleanup(func() { close(s.out); nc.Close() })
	return s
}

func benchFrames(b *testing.B, n benchNet, reqF, respF []byte) {
	ln, err := n.srv.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
	}()
	cc, err := n.cli.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	cli, srv := newFramesSide(b, cc), newFramesSide(b, <-accepted)
	go func() {
		for range srv.in {
			srv.out <- append([]byte(nil), respF...)
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		cli.out <- append([]byte(nil), reqF...)
		if _, ok := <-cli.in; !ok {
			b.Fatal("connection lost")
		}
	}
}

func benchZMTP(b *testing.B, n benchNet, req, resp []byte) {
	listen := func(nw netenv.Network) *Router {
		ln, err := nw.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		r := NewRouter(ln, vllmHB)
		b.Cleanup(func() { r.Close() })
		return r
	}
	dial := func(nw netenv.Network, id string, to *Router) *Dealer {
		o := vllmHB
		o.Identity, o.Net = []byte(id), nw
		d := NewDealer(o)
		b.Cleanup(func() { d.Close() })
		d.Connect(to.Addr().String())
		return d
	}
	cr, sr := listen(n.cli), listen(n.srv)
	cd, sd := dial(n.cli, cr.Addr().String(), sr), dial(n.srv, sr.Addr().String(), cr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			_, p, err := sr.Recv(ctx)
			if err != nil {
				return
			}
			if _, err := wire.Decode(p); err != nil {
				b.Error(err)
				return
			}
			sd.Send(append([]byte(nil), resp...))
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		cd.Send(append([]byte(nil), req...))
		_, p, err := cr.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := wire.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

func benchZMTPOneConn(b *testing.B, n benchNet, req, resp []byte) {
	ln, err := n.srv.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r := NewRouter(ln, vllmHB)
	b.Cleanup(func() { r.Close() })
	o := vllmHB
	o.Identity, o.Net = []byte("cli"), n.cli
	d := NewDealer(o)
	b.Cleanup(func() { d.Close() })
	d.Connect(ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			id, p, err := r.Recv(ctx)
			if err != nil {
				return
			}
			if _, err := wire.Decode(p); err != nil {
				b.Error(err)
				return
			}
			r.Send(id, append([]byte(nil), resp...))
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		d.Send(append([]byte(nil), req...))
		p, err := d.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := wire.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

// lenFrame and readLenFrame are the sim's control frames before issue 38
// (a 4-byte big-endian length, then the payload; sim/link's framing now,
// which this package cannot import): the baseline the benchmark measures
// ZMTP against.
func lenFrame(p []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...)
}

func readLenFrame(br *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(br, p)
	return p, err
}
