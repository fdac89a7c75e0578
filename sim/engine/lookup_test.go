package engine

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"p2pfault/sim/wire"
)

// halfOpen is a decoder and a source holding a prompt, with a switch that
// withholds every lookup_resp on its way to the decoder while the
// heartbeats still flow: p2pfault's mute, the half-open peer of #56823.
type halfOpen struct {
	src, dec    *driven
	toks, after []int32 // prompts the source holds, the decoder not
	mute        atomic.Bool
}

func startHalfOpen(t *testing.T, name string, mode LookupDeadline, mutate func(*Config)) *halfOpen {
	h := &halfOpen{toks: prompt(name, 64), after: prompt(name+" after", 64)}
	h.src = startEngine(t, mutate)
	h.dec = startEngine(t, func(c *Config) {
		if mutate != nil {
			mutate(c)
		}
		c.LookupDeadline = mode
		c.withhold = func(m wire.Message) bool { return h.mute.Load() && m.Type == wire.TypeLookupResp }
	})
	warm := prompt(name+" warm", 64)
	for _, p := range [][]int32{warm, h.toks, h.after} {
		run(t, h.src, Request{Tokens: p, MaxTokens: 1})
	}
	if got := run(t, h.dec, pull(h.src, warm, name+"-warm")); got.res.CachedTokens == 0 {
		t.Fatal("the warm-up pull did not hit")
	}
	return h
}

// pins counts the lookup pins the source holds (its hits waiting for a
// fetch, mechanism 10).
func (h *halfOpen) pins(t *testing.T) int {
	var n int
	inspect(t, h.src, func() { n = len(h.src.pins) })
	return n
}

// TestLookupDeadlinesAgainstAHalfOpenPeer: the lookup_resp never comes
// while the peer's heartbeats do. The seed's build (silence) and #56836
// (progress) end the pull at the lookup timeout from its send, reap the
// session and prefill locally; vLLM main (none) waits until the request
// ends, then sends the terminal empty fetch and keeps the session.
func TestLookupDeadlinesAgainstAHalfOpenPeer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		mode LookupDeadline
		line string // the decoder's warning
	}{
		{LookupSilence, "timed out after 0.3s"},
		{LookupProgress, "timed out after 0.3s: request half-open made no progress"},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				h := startHalfOpen(t, "half-open "+tc.mode.String(), tc.mode, func(c *Config) { c.LookupTimeout = timeout })
				h.mute.Store(true)
				got := run(t, h.dec, pull(h.src, h.toks, "half-open"))
				h.mute.Store(false)
				if got.res.Err != nil || got.res.CachedTokens != 0 {
					t.Fatalf("the muted pull: %+v, want a local prefill", got.res)
				}
				// Sent at the first step, reaped at the first step past the
				// timeout, then a prefill of 64 tokens: a few ticks.
				if lo, hi := timeout, timeout+10*h.dec.cfg.Tick; got.latency < lo || got.latency > hi {
					t.Errorf("the muted pull took %v, want %v to %v (the lookup timeout from its send)", got.latency, lo, hi)
				}
				log := h.dec.log.String()
				for _, want := range []string{"lookup on " + h.src.ID() + " " + tc.line, "peer " + h.src.ID() + " down: lookup timed out"} {
					if !strings.Contains(log, want) {
						t.Errorf("decoder log lacks %q:\n%s", want, log)
					}
				}
				if again := run(t, h.dec, pull(h.src, h.after, "after")); again.res.CachedTokens == 0 {
					t.Error("the pull after the reap did not hit on a new session")
				}
			})
		})
	}
	t.Run("none", func(t *testing.T) {
		virtual(t, func(t *testing.T) {
			h := startHalfOpen(t, "half-open none", LookupNone, func(c *Config) { c.LookupTimeout = timeout })
			h.mute.Store(true)
			id := h.dec.ids.Add(1)
			ended := make(chan Result, 1)
			h.dec.Submit(id, pull(h.src, h.toks, "half-open"), func(r Result) { ended <- r })
			// Many lookup timeouts and heartbeat timeouts later it still
			// waits: the heartbeats keep the session up.
			wait := 10 * max(timeout, h.dec.cfg.HeartbeatTimeout)
			select {
			case r := <-ended:
				t.Fatalf("the pull ended (%+v) with no lookup deadline", r)
			case <-time.After(wait):
			}
			if n := h.pins(t); n != 1 {
				t.Fatalf("the source holds %d lookup pins, want the muted lookup's 1", n)
			}
			// The client gives up: finish_request's terminal empty fetch
			// releases what the source pinned for it.
			h.dec.Cancel(id)
			waitFor(t, "the source to release the lookup's pins", func() bool { return h.pins(t) == 0 })
			select {
			case r := <-ended:
				t.Errorf("a cancelled request reported %+v", r)
			default:
			}
			h.mute.Store(false)
			if again := run(t, h.dec, pull(h.src, h.after, "after")); again.res.CachedTokens == 0 {
				t.Error("the pull after the cancel did not hit")
			}
			log := h.dec.log.String()
			if n := strings.Count(log, "peer "+h.src.ID()+" connected"); n != 1 || strings.Contains(log, "down:") {
				t.Errorf("want one session all along (connected %d times):\n%s", n, log)
			}
		})
	})
}

// TestLookupDeadlinesAgainstAFrozenPeer: the source stops (SIGSTOP) and a
// pull is sent 200 ms later. The seed's build counts its deadline from the
// peer's last word, so the pull ends before a lookup timeout from its send
// (the seed's 7.08 s under 8 s); #56836 counts from the send; vLLM main
// has none, so the heartbeat ends it.
func TestLookupDeadlinesAgainstAFrozenPeer(t *testing.T) {
	const (
		timeout = 300 * time.Millisecond
		late    = 200 * time.Millisecond
	)
	slowHeartbeat := func(c *Config) {
		c.LookupTimeout, c.HeartbeatInterval, c.HeartbeatTimeout = timeout, 50*time.Millisecond, time.Second
	}
	for _, tc := range []struct {
		mode   LookupDeadline
		lo, hi time.Duration // the pull's latency
		reason string
	}{
		// The last PONG came at most an interval before the freeze.
		{LookupSilence, timeout - late - 20*time.Millisecond, timeout - late + 60*time.Millisecond, "lookup timed out"},
		{LookupProgress, timeout, timeout + 20*time.Millisecond, "lookup timed out"},
		// The heartbeat timeout from the first unanswered ping, less the
		// 200 ms before the pull.
		{LookupNone, time.Second - late - 60*time.Millisecond, time.Second - late + 60*time.Millisecond, "heartbeat timed out"},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				h := startHalfOpen(t, "frozen "+tc.mode.String(), tc.mode, slowHeartbeat)
				h.src.setPaused(true)
				t.Cleanup(func() { h.src.setPaused(false) })
				time.Sleep(late)
				got := run(t, h.dec, pull(h.src, h.toks, "frozen"))
				if got.res.Err != nil || got.res.CachedTokens != 0 {
					t.Fatalf("the pull: %+v, want a local prefill", got.res)
				}
				if got.latency < tc.lo || got.latency > tc.hi {
					t.Errorf("the pull took %v, want %v to %v", got.latency, tc.lo, tc.hi)
				}
				if want := "peer " + h.src.ID() + " down: " + tc.reason; !strings.Contains(h.dec.log.String(), want) {
					t.Errorf("decoder log lacks %q:\n%s", want, h.dec.log.String())
				}
			})
		})
	}
}
