package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/memnet"
	"p2pfault/sim/wire"
	"p2pfault/zmtp"
)

// rawPair is a decoder's DEALER (identity decoderID) connected through a
// link to a source listening at src (a listener the test serves).
type rawPair struct {
	l      *Link
	dealer *zmtp.Dealer
	src    net.Listener
}

const decoderID = "127.0.0.1:7001"

// before, if given, acts on the link before the DEALER dials it.
func newRawPair(t *testing.T, fab *memnet.Fabric, before ...func(*Link)) rawPair {
	t.Helper()
	src, err := fab.Host("source").Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	l, err := New(Config{Name: "d>s", Decoder: decoderID, Source: src.Addr().String(), Net: fab.Host("link")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, f := range before {
		f(l)
	}
	d := zmtp.NewDealer(zmtp.Options{Identity: []byte(decoderID), Net: fab.Host("decoder")})
	t.Cleanup(func() { d.Close() })
	if err := d.Connect(l.SourceAddr()); err != nil {
		t.Fatal(err)
	}
	return rawPair{l: l, dealer: d, src: src}
}

func encode(t *testing.T, m wire.Message) []byte {
	t.Helper()
	b, err := wire.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFaultsDropAndDelayOneMessage: a dropped message never arrives, a
// delayed one arrives its delay later, and the message behind it is not
// held up.
func TestFaultsDropAndDelayOneMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		p := newRawPair(t, fab)
		r := zmtp.NewRouter(p.src, zmtp.Options{})
		defer r.Close()
		p.l.SetFault(func(m Message) Action {
			switch m.Type {
			case wire.TypeLookup:
				return Action{Verb: Drop}
			case wire.TypeFetch:
				return Action{Verb: Delay, Delay: 200 * time.Millisecond}
			}
			return Action{}
		})
		start := time.Now()
		for _, typ := range []string{wire.TypeLookup, wire.TypeFetch, wire.TypeAbortFetch} {
			p.dealer.Send(encode(t, wire.Message{Type: typ, KVRequestID: "k"}))
		}
		want := []struct {
			typ string
			at  time.Duration
		}{{wire.TypeAbortFetch, 0}, {wire.TypeFetch, 200 * time.Millisecond}}
		for _, w := range want {
			id, b, err := r.Recv(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m, _ := wire.Decode(b)
			if m.Type != w.typ || time.Since(start) != w.at || string(id) != p.l.DecoderAddr() {
				t.Errorf("got %s from %q at %v, want %s from %s at %v", m.Type, id, time.Since(start), w.typ, p.l.DecoderAddr(), w.at)
			}
		}
		c := p.l.Counters()
		if c.Of(ToSource, wire.TypeLookup).Dropped != 1 || c.Of(ToSource, wire.TypeFetch).Delayed != 1 || c.Of(ToSource, wire.TypeAbortFetch).Passed != 1 {
			t.Errorf("counters %+v", c.Messages)
		}
	})
}

// throttled is a raw pair whose source side is a ROUTER, its first message
// (the handshake) through, and the link then under bandwidth rate.
func throttled(t *testing.T, rate float64) (rawPair, *zmtp.Router) {
	t.Helper()
	p := newRawPair(t, memnet.New(1))
	r := zmtp.NewRouter(p.src, zmtp.Options{})
	t.Cleanup(func() { r.Close() })
	p.dealer.Send([]byte("first")) // the handshake, unthrottled
	r.Recv(context.Background())
	p.l.SetToxics(Toxics{Bandwidth: rate})
	return p, r
}

// TestBandwidthPacesTheBytes: 50 000 bytes at 100 000 bytes/s arrive half
// a second after they were sent.
func TestBandwidthPacesTheBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := throttled(t, 100_000)
		start := time.Now()
		p.dealer.Send(make([]byte, 50_000-9)) // 9 bytes of frame header
		if _, _, err := r.Recv(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 500*time.Millisecond {
			t.Errorf("50 kB at 100 kB/s arrived after %v, want 500ms", got)
		}
		if n := p.l.Counters().Unparsed[ToSource]; n != 2 {
			t.Errorf("%d messages relayed untouched, want 2 (neither is a control message)", n)
		}
	})
}

// TestBandwidthChargesTheSimsInlineData: a transfer_done declaring 500 000
// bytes (the sim's blocks, carried inline) at 1 000 000 bytes/s arrives
// half a second after it was sent, though its frame is a few bytes.
func TestBandwidthChargesTheSimsInlineData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := throttled(t, 1_000_000)
		start := time.Now()
		b := encode(t, wire.Message{Type: wire.TypeTransferDone, KVRequestID: "k", Success: true, Bytes: 500_000})
		p.dealer.Send(b)
		if _, _, err := r.Recv(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := 500*time.Millisecond + time.Duration(len(b)+9)*time.Microsecond
		if got := time.Since(start); got < 500*time.Millisecond || got > want {
			t.Errorf("a transfer_done of 500 kB (%d bytes framed) at 1 MB/s arrived after %v, want 500ms plus its frame's (at most %v)", len(b), got, want)
		}
	})
}

// TestResetResetsBothSides: Reset ends both connections with an RST.
func TestResetResetsBothSides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		p := newRawPair(t, fab)
		sc, err := p.src.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		synctest.Wait()
		if n := p.l.Reset(); n != 1 {
			t.Fatalf("Reset reset %d pairs, want 1", n)
		}
		if _, err := io.ReadAll(sc); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("source side after Reset: %v, want ECONNRESET", err)
		}
		for ev := range p.dealer.Events() {
			if ev.Kind == zmtp.Disconnected {
				if !errors.Is(ev.Err, syscall.ECONNRESET) {
					t.Errorf("decoder side after Reset: %v, want ECONNRESET", ev.Err)
				}
				break
			}
		}
	})
}

// TestSlowCloseHoldsTheClose: the decoder's close reaches the source the
// slow-close delay later; a source that cannot be reached resets the
// decoder's connection at once.
func TestSlowCloseHoldsTheClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		p := newRawPair(t, fab)
		p.l.SetToxics(Toxics{SlowClose: 3 * time.Second})
		sc, err := p.src.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		synctest.Wait()
		closed := time.Now()
		p.dealer.Close()
		if b, err := io.ReadAll(sc); err != nil || len(b) < zmtp.GreetingLen {
			t.Errorf("source read %d bytes then %v, want the greeting and more, then EOF", len(b), err)
		}
		if got := time.Since(closed); got != 3*time.Second {
			t.Errorf("the close reached the source %v after it was made, want 3s", got)
		}
		p.src.Close()
		c, err := fab.Host("decoder2").DialContext(context.Background(), "tcp", p.l.SourceAddr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a connection whose source refuses: %v, want ECONNRESET", err)
		}
		if n := p.l.Counters().Refused; n != 1 {
			t.Errorf("%d refused, want 1", n)
		}
	})
}

// TestResetNewResetsEachNewConnection: while ResetNew is set, every
// connection relayed is reset as soon as its far side is dialed (a link
// that keeps breaking); once it is cleared, connections stay up.
func TestResetNewResetsEachNewConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		// Set before the DEALER dials: set after, the first connection
		// could be relayed before it (one run in fifteen under -race).
		p := newRawPair(t, fab, func(l *Link) { l.SetToxics(Toxics{ResetNew: true}) })
		sc, err := p.src.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if _, err := io.ReadAll(sc); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("source side of a new connection under ResetNew: %v, want ECONNRESET", err)
		}
		p.l.SetToxics(Toxics{})
		sc2, err := p.src.Accept() // the DEALER's redial
		if err != nil {
			t.Fatal(err)
		}
		defer sc2.Close()
		b := make([]byte, zmtp.GreetingLen)
		if _, err := io.ReadFull(sc2, b); err != nil {
			t.Errorf("the redial after ResetNew was cleared: %v, want its greeting", err)
		}
		if n := p.l.Counters().Resets; n != 1 {
			t.Errorf("%d resets counted, want 1", n)
		}
	})
}
