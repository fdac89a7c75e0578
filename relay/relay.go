// Package relay is p2pfault's protocol-aware link between one decoder and
// one source of vLLM's P2P control channel: it stands between them so
// that faults can act on single messages and on the link itself (delay,
// bandwidth, resets) with the engines untouched.
//
// vLLM lays the channel out as control/zmq.py does (@13d40492): each
// engine binds a ROUTER at its P2P address and opens one DEALER per peer
// whose identity is its own "host:port"; messages only go DEALER →
// ROUTER, so a reply crosses the other TCP connection, which the receiver
// dials back to the sender's identity. A Link listens on two addresses:
// SourceAddr, named to the decoder as the source (the trial's
// remote_kv_source), and DecoderAddr, which the source sees as the
// decoder. A connection to SourceAddr is relayed to the source's ROUTER
// with the decoder's identity (READY's Identity and connect's peer_id)
// rewritten to DecoderAddr, so the source dials its replies back to the
// link; a connection to DecoderAddr is relayed to the decoder's ROUTER
// with the source's identity rewritten to SourceAddr. Each side sees the
// other's stand-in only, and both directions pass through the link.
//
// The link forwards frames as they come, ZMTP heartbeats included: it
// never answers a PING itself, so a stopped source's silence reaches the
// decoder exactly and libzmq's heartbeat declares it dead as it would
// without the link. A message that does not parse is relayed untouched.
package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"p2pfault/netenv"
)

// Dir is a direction through the link.
type Dir int

const (
	// ToSource is what the decoder sends: connect, connect_ack of the
	// source's connect, lookup, fetch, abort_fetch, disconnect.
	ToSource Dir = iota + 1
	// ToDecoder is what the source sends: connect, connect_ack,
	// lookup_resp, transfer_done, abort_ack, disconnect.
	ToDecoder
)

func (d Dir) String() string {
	switch d {
	case ToSource:
		return "decoder>source"
	case ToDecoder:
		return "source>decoder"
	}
	return fmt.Sprintf("Dir(%d)", int(d))
}

// Defaults.
const (
	// DefaultTraceKeep is how many trace records a link keeps.
	DefaultTraceKeep = 1024
	// DefaultHoldMax bounds the messages a link withholds; past it the
	// oldest is dropped (and counted dropped).
	DefaultHoldMax = 4096
	// queueMax bounds the messages waiting in one direction (a delay or
	// a slow link): past it the link stops reading that side, as a full
	// socket buffer stops TCP.
	queueMax = 1024
)

// Config is one decoder ↔ source pair.
type Config struct {
	// Name names the pair in the trace and the counters
	// ("decoder-0>source-0").
	Name string
	// Decoder and Source are the engines' P2P addresses ("host:port"):
	// their ROUTERs, and their DEALERs' identities.
	Decoder, Source string
	// SourceListen and DecoderListen are where the link listens (default
	// "127.0.0.1:0" each).
	SourceListen, DecoderListen string
	// Net is the network the link listens and dials on (nil: the OS's).
	Net netenv.Network
	// Seed seeds the latency's jitter, so a virtual run replays exactly.
	Seed uint64
	// Trace, when set, is told every message through the link, in each
	// direction's order, on the link's goroutines: it must not block.
	Trace func(Record)
	// TraceKeep is how many records Trace keeps (0: DefaultTraceKeep).
	TraceKeep int
	// HoldMax bounds the messages withheld (0: DefaultHoldMax).
	HoldMax int
	// Logf receives a line for every connection that could not be relayed
	// (nil: discarded).
	Logf func(format string, args ...any)
}

// Link relays one decoder ↔ source pair. Its methods are safe for
// concurrent use.
type Link struct {
	cfg      Config
	nw       netenv.Network
	lnS, lnD net.Listener
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	fault    func(Message) Action
	toxics   Toxics
	rng      *rand.Rand
	sessions map[*session]bool
	held     []heldMsg
	counts   Counters
	trace    []Record
	traceAt  int // next slot of trace once it is full
}

// New listens on the link's two addresses and relays in the background
// until Close.
func New(cfg Config) (*Link, error) {
	if _, _, err := net.SplitHostPort(cfg.Decoder); err != nil {
		return nil, fmt.Errorf("relay: decoder address %q: %w", cfg.Decoder, err)
	}
	if _, _, err := net.SplitHostPort(cfg.Source); err != nil {
		return nil, fmt.Errorf("relay: source address %q: %w", cfg.Source, err)
	}
	if cfg.SourceListen == "" {
		cfg.SourceListen = "127.0.0.1:0"
	}
	if cfg.DecoderListen == "" {
		cfg.DecoderListen = "127.0.0.1:0"
	}
	if cfg.TraceKeep <= 0 {
		cfg.TraceKeep = DefaultTraceKeep
	}
	if cfg.HoldMax <= 0 {
		cfg.HoldMax = DefaultHoldMax
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	nw := netenv.Or(cfg.Net)
	lnS, err := nw.Listen("tcp", cfg.SourceListen)
	if err != nil {
		return nil, fmt.Errorf("relay %s: listen for the decoder: %w", cfg.Name, err)
	}
	lnD, err := nw.Listen("tcp", cfg.DecoderListen)
	if err != nil {
		lnS.Close()
		return nil, fmt.Errorf("relay %s: listen for the source: %w", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Link{
		cfg: cfg, nw: nw, lnS: lnS, lnD: lnD, ctx: ctx, cancel: cancel,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)), sessions: map[*session]bool{},
		counts: newCounters(),
	}
	l.wg.Add(2)
	go l.accept(lnS, ToSource)
	go l.accept(lnD, ToDecoder)
	return l, nil
}

// Name is the pair's name.
func (l *Link) Name() string { return l.cfg.Name }

// SourceAddr is the address to name to the decoder as the source.
func (l *Link) SourceAddr() string { return l.lnS.Addr().String() }

// DecoderAddr is the address the source sees as the decoder.
func (l *Link) DecoderAddr() string { return l.lnD.Addr().String() }

// rewrite is the identity a direction replaces, and by what.
func (l *Link) rewrite(dir Dir) (from, to string) {
	if dir == ToSource {
		return l.cfg.Decoder, l.DecoderAddr()
	}
	return l.cfg.Source, l.SourceAddr()
}

// far is the engine a direction's connections are relayed to.
func (l *Link) far(dir Dir) string {
	if dir == ToSource {
		return l.cfg.Source
	}
	return l.cfg.Decoder
}

func (l *Link) accept(ln net.Listener, dir Dir) {
	defer l.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			l.cfg.Logf("relay %s: accept (%s): %v", l.cfg.Name, dir, err)
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		l.wg.Add(1)
		go l.serve(nc, dir)
	}
}

// serve relays one accepted connection: the far engine is dialed first;
// when it cannot be reached the accepted connection is reset, the nearest
// a relay can come to the refused connect the engine would have met.
func (l *Link) serve(near net.Conn, dir Dir) {
	defer l.wg.Done()
	far, err := l.nw.DialContext(l.ctx, "tcp", l.far(dir))
	if err != nil {
		l.cfg.Logf("relay %s: %s: dial %s: %v: resetting the connection from %s", l.cfg.Name, dir, l.far(dir), err, near.RemoteAddr())
		l.count(func(c *Counters) { c.Refused++ })
		abort(near)
		return
	}
	s := newSession(l, near, far, dir)
	if !l.track(s, true) {
		near.Close()
		far.Close()
		return
	}
	l.count(func(c *Counters) { c.Conns++ })
	if l.resetNew() {
		l.count(func(c *Counters) { c.Resets++ })
		s.reset()
	}
	s.run()
	l.track(s, false)
}

func (l *Link) track(s *session, add bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !add {
		delete(l.sessions, s)
		return true
	}
	if l.ctx.Err() != nil {
		return false
	}
	l.sessions[s] = true
	return true
}

// abort closes c with a reset (SO_LINGER 0), where the network can.
func abort(c net.Conn) {
	if lc, ok := c.(interface{ SetLinger(int) error }); ok {
		lc.SetLinger(0)
	}
	c.Close()
}

// Reset resets every connection through the link, both sides at once (an
// RST each way, mid-stream), and returns how many pairs it reset. New
// connections are relayed as before.
func (l *Link) Reset() int {
	l.mu.Lock()
	ss := make([]*session, 0, len(l.sessions))
	for s := range l.sessions {
		ss = append(ss, s)
	}
	l.counts.Resets += int64(len(ss))
	l.mu.Unlock()
	for _, s := range ss {
		s.reset()
	}
	return len(ss)
}

// Close stops listening, ends every connection (with a FIN each way) and
// waits for the link's goroutines. Withheld messages are dropped.
func (l *Link) Close() error {
	l.cancel()
	l.lnS.Close()
	l.lnD.Close()
	l.mu.Lock()
	ss := make([]*session, 0, len(l.sessions))
	for s := range l.sessions {
		ss = append(ss, s)
	}
	l.held = nil
	l.mu.Unlock()
	for _, s := range ss {
		s.close()
	}
	l.wg.Wait()
	return nil
}
