package relay

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/memnet"
	"p2pfault/sim/wire"
)

// TestSimEnginesTalkThroughTheLink: a pull named to the link hits, the
// replies cross it (the source dials the decoder's stand-in back), each
// engine sees only the other's stand-in, and heartbeats pass both ways.
func TestSimEnginesTalkThroughTheLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src, dec := startSim(t, fab), startSim(t, fab)
		l := newLink(t, fab, dec, src)
		toks := prompt("through", 40)
		src.run(t, reqOf(toks))
		res, _ := dec.pull(t, l.SourceAddr(), toks, "p1")
		if res.Err != nil || res.CachedTokens != 32 {
			t.Fatalf("pull through the link: %d cached tokens (%v), want 32", res.CachedTokens, res.Err)
		}
		time.Sleep(time.Second) // heartbeats
		c := l.Counters()
		for _, k := range []Key{
			{ToSource, wire.TypeConnect}, {ToSource, wire.TypeLookup}, {ToSource, wire.TypeFetch}, {ToSource, wire.TypeConnectAck},
			{ToDecoder, wire.TypeConnect}, {ToDecoder, wire.TypeConnectAck}, {ToDecoder, wire.TypeLookupResp}, {ToDecoder, wire.TypeTransferDone},
		} {
			if c.Of(k.Dir, k.Type).Passed == 0 {
				t.Errorf("no %s passed %s: %+v", k.Type, k.Dir, c.Messages)
			}
		}
		if c.Heartbeats[ToSource] == 0 || c.Heartbeats[ToDecoder] == 0 {
			t.Errorf("heartbeats relayed: %v, want some each way", c.Heartbeats)
		}
		if c.Conns != 2 {
			t.Errorf("%d connections relayed, want 2 (the decoder's DEALER, the source's)", c.Conns)
		}
		if got, want := src.log.String(), "accepted connect from "+l.DecoderAddr(); !strings.Contains(got, want) {
			t.Errorf("source's log lacks %q:\n%s", want, got)
		}
		if got, want := dec.log.String(), "peer "+l.SourceAddr()+" connected"; !strings.Contains(got, want) {
			t.Errorf("decoder's log lacks %q:\n%s", want, got)
		}
		for _, who := range []*simEngine{src, dec} {
			other := dec.ID()
			if who == dec {
				other = src.ID()
			}
			if strings.Contains(who.log.String(), other) {
				t.Errorf("an engine's log names the other's own address %s:\n%s", other, who.log.String())
			}
		}
		tr := l.Trace()
		if len(tr) == 0 || tr[0].Type != wire.TypeConnect || tr[0].Dir != ToSource || tr[0].PeerID != l.DecoderAddr() {
			t.Errorf("first trace record %+v, want the decoder's connect as %s", tr[0], l.DecoderAddr())
		}
	})
}

// TestStalledSourceIsSeenDeadThroughTheLink: the link answers no PING, so a
// frozen source is reaped by the decoder's heartbeat as without the link:
// the heartbeat timeout after the first unanswered PING.
func TestStalledSourceIsSeenDeadThroughTheLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src, dec := startSim(t, fab), startSim(t, fab)
		l := newLink(t, fab, dec, src)
		toks := prompt("stall", 40)
		src.run(t, reqOf(toks))
		if res, _ := dec.pull(t, l.SourceAddr(), toks, "w"); res.CachedTokens == 0 {
			t.Fatal("warm-up pull did not hit")
		}
		frozen := time.Now()
		src.host.Freeze()
		want := "peer " + l.SourceAddr() + " down: heartbeat timed out after 0.4s"
		for !strings.Contains(dec.log.String(), want) {
			if time.Since(frozen) > 5*time.Second {
				t.Fatalf("no %q within 5 s:\n%s", want, dec.log.String())
			}
			time.Sleep(time.Millisecond)
		}
		cfg := simConfig()
		if d := time.Since(frozen); d < cfg.HeartbeatTimeout-cfg.HeartbeatInterval || d > cfg.HeartbeatTimeout+cfg.HeartbeatInterval+10*time.Millisecond {
			t.Errorf("reaped %v after the freeze, want the heartbeat timeout %v within an interval", d, cfg.HeartbeatTimeout)
		}
	})
}

// TestMuteWithholdsLookupResp: with every lookup_resp withheld while the
// heartbeats flow, a pull waits for the lookup deadline and misses; the
// counters say what was withheld and what passed.
func TestMuteWithholdsLookupResp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src, dec := startSim(t, fab), startSim(t, fab)
		l := newLink(t, fab, dec, src)
		toks := prompt("mute", 40)
		src.run(t, reqOf(toks))
		dec.pull(t, l.SourceAddr(), prompt("warm", 40), "w") // the handshake first
		l.SetFault(func(m Message) Action {
			if m.Dir == ToDecoder && m.Type == wire.TypeLookupResp {
				return Action{Verb: Hold}
			}
			return Action{}
		})
		res, took := dec.pull(t, l.SourceAddr(), toks, "m")
		if res.CachedTokens != 0 {
			t.Errorf("muted pull: %d cached tokens, want 0 (a miss)", res.CachedTokens)
		}
		if lo := simConfig().LookupTimeout; took < lo || took > lo+20*time.Millisecond {
			t.Errorf("muted pull took %v, want the lookup timeout %v (and a few ticks)", took, lo)
		}
		c := l.Counters()
		t.Logf("muted pull took %v; lookup_resp withheld %d, heartbeats passed %v", took, c.Of(ToDecoder, wire.TypeLookupResp).Held, c.Heartbeats)
		if got := c.Of(ToDecoder, wire.TypeLookupResp).Held; got != 1 {
			t.Errorf("%d lookup_resp withheld, want 1", got)
		}
		if !strings.Contains(dec.log.String(), "lookup on "+l.SourceAddr()+" timed out") {
			t.Errorf("decoder's log lacks the lookup deadline:\n%s", dec.log.String())
		}
		if n := l.Discard(); n != 1 {
			t.Errorf("Discard dropped %d, want 1", n)
		}
	})
}

// TestHoldAckWaitsTheHandshakeDeadline: the source's connect_ack withheld,
// the decoder's first pull waits for the handshake timeout and misses.
func TestHoldAckWaitsTheHandshakeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src, dec := startSim(t, fab), startSim(t, fab)
		l := newLink(t, fab, dec, src)
		l.SetFault(func(m Message) Action {
			if m.Dir == ToDecoder && m.Type == wire.TypeConnectAck {
				return Action{Verb: Hold}
			}
			return Action{}
		})
		toks := prompt("ack", 40)
		src.run(t, reqOf(toks))
		res, took := dec.pull(t, l.SourceAddr(), toks, "a")
		if res.CachedTokens != 0 {
			t.Errorf("pull with the ack withheld: %d cached tokens, want 0", res.CachedTokens)
		}
		if hs := simConfig().HandshakeTimeout; took < hs || took > hs+20*time.Millisecond {
			t.Errorf("pull took %v, want the handshake timeout %v (and a few ticks)", took, hs)
		}
		if got := l.Counters().Of(ToDecoder, wire.TypeConnectAck).Held; got != 1 {
			t.Errorf("%d connect_ack withheld, want 1", got)
		}
		// Undone, the next pull hits.
		l.SetFault(nil)
		l.Discard()
		if res, _ := dec.pull(t, l.SourceAddr(), toks, "b"); res.CachedTokens != 32 {
			t.Errorf("pull after the fault: %d cached tokens, want 32", res.CachedTokens)
		}
	})
}

// TestLatencyDelaysEveryCrossing: with 25 ms each way, a pull on a ready
// session (lookup, lookup_resp, fetch, transfer_done: two round trips)
// takes 100 ms more than without.
func TestLatencyDelaysEveryCrossing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src, dec := startSim(t, fab), startSim(t, fab)
		l := newLink(t, fab, dec, src)
		a, b := prompt("lat-a", 40), prompt("lat-b", 40)
		src.run(t, reqOf(a))
		src.run(t, reqOf(b))
		dec.pull(t, l.SourceAddr(), prompt("warm", 40), "w")
		_, base := dec.pull(t, l.SourceAddr(), a, "a")
		l.SetToxics(Toxics{Latency: 25 * time.Millisecond})
		res, slow := dec.pull(t, l.SourceAddr(), b, "b")
		if res.CachedTokens != 32 {
			t.Fatalf("pull under latency: %d cached tokens, want 32", res.CachedTokens)
		}
		t.Logf("pull on a ready session: %v without latency, %v with 25 ms each way", base, slow)
		// Each engine acts on its 2 ms tick, so either measure may gain or
		// lose a tick at each of its two ends.
		if extra := slow - base; extra < 96*time.Millisecond || extra > 110*time.Millisecond {
			t.Errorf("latency 25 ms added %v to a pull (%v → %v), want 100 ms (four crossings) within a few ticks", extra, base, slow)
		}
	})
}

func reqOf(toks []int32) engineRequest { return engineRequest{Tokens: toks, MaxTokens: 1} }
