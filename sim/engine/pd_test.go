package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"p2pfault/sim/kv"
)

// prefillLeg is the PD producer leg vLLM's proxy sends the prefiller.
func prefillLeg(tokens []int32, id string) Request {
	return Request{Tokens: tokens, MaxTokens: 1, RemoteDecoder: id}
}

// decodeLeg is the PD consumer leg naming the prefiller src.
func decodeLeg(src *driven, tokens []int32, id string) Request {
	host, port := splitID(src.ID())
	return Request{Tokens: tokens, MaxTokens: 1, Source: &RemoteSource{KVRequestID: id, Host: host, Port: port, Prefiller: true}}
}

// inspect runs fn on e's stepping goroutine and waits for it.
func inspect(t *testing.T, e *driven, fn func()) {
	t.Helper()
	done := make(chan struct{})
	if !e.do(func() { fn(); close(done) }) {
		t.Fatal("engine shut down")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("engine took no step in 5s")
	}
}

// parkedState is what the producer holds for one kv_request_id.
type parkedState struct {
	exists, bound, reaped bool
	blocks                int
	pinned                int // of its blocks, those pinned in the CPU tier
}

func parkedOf(t *testing.T, e *driven, id string) parkedState {
	t.Helper()
	var ps parkedState
	inspect(t, e, func() {
		_, ps.reaped = e.reaped[id]
		st := e.parked[id]
		if st == nil {
			return
		}
		ps.exists, ps.bound, ps.blocks = true, st.c != nil, len(st.keys)
		for _, k := range st.keys {
			if e.cpu.Pinned(k) {
				ps.pinned++
			}
		}
	})
	return ps
}

func TestPDParkedBlocksAreBoundByALaterFetch(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		bs := src.cfg.BlockSize
		toks := prompt(t.Name(), 3*bs+5)

		pre := run(t, src, prefillLeg(toks, "pd-1"))
		if pre.res.Err != nil {
			t.Fatalf("prefill leg: %v", pre.res.Err)
		}
		// Every full block of the prompt is parked and pinned for the id
		// (REQUEST_LEVEL: the decoder needs all of them).
		if ps := parkedOf(t, src, "pd-1"); !ps.exists || ps.bound || ps.blocks != 3 || ps.pinned != 3 {
			t.Fatalf("after the prefill leg the source holds %+v, want 3 parked, pinned, unbound blocks", ps)
		}
		got := run(t, dec, decodeLeg(src, toks, "pd-1"))
		if got.res.Err != nil {
			t.Fatalf("decode leg: %v", got.res.Err)
		}
		if got.res.CachedTokens != 3*bs || got.res.Stats.P2PReadBytes != 3*src.blockBytes {
			t.Errorf("decode leg cached %d tokens, read %d bytes over P2P; want %d, %d", got.res.CachedTokens, got.res.Stats.P2PReadBytes, 3*bs, 3*src.blockBytes)
		}
		// Served once: the store is gone and its pins released.
		if ps := parkedOf(t, src, "pd-1"); ps.exists || ps.reaped {
			t.Errorf("after the fetch the source still holds %+v for the id", ps)
		}
		var pinned int
		inspect(t, src, func() {
			for _, h := range kv.BlockHashes(src.cfg.HashSeed, "", toks, bs) {
				if src.cpu.Pinned(h) {
					pinned++
				}
			}
		})
		if pinned != 0 {
			t.Errorf("%d of the prompt's blocks are still pinned on the source", pinned)
		}
		// Past the start line, which names the lookup deadline.
		if _, after, _ := strings.Cut(dec.log.String(), "dead-session loads"); strings.Contains(after, "lookup") {
			t.Errorf("the decode leg probed the prefiller (PD mode has no lookup):\n%s", dec.log)
		}
	})
}

func TestPDDecoderFirst(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		warm(t, src, dec)
		bs := src.cfg.BlockSize
		toks := prompt(t.Name(), 3*bs+5)

		// The decode leg comes first: its fetch finds nothing parked, records
		// its demand and binds the id (server.py on_fetch).
		start := time.Now()
		ch := runAsync(dec, decodeLeg(src, toks, "pd-df"))
		waitFor(t, "the fetch to bind the id on the source", func() bool { return parkedOf(t, src, "pd-df").bound })
		if ps := parkedOf(t, src, "pd-df"); ps.blocks != 0 {
			t.Fatalf("the source holds %d blocks before its prefill ran", ps.blocks)
		}
		select {
		case o := <-ch:
			t.Fatalf("the decode leg ended before its blocks existed: %+v", o.res)
		default:
		}
		waited := time.Since(start)
		// The prefill leg's store meets the demand and is sent at once.
		if pre := run(t, src, prefillLeg(toks, "pd-df")); pre.res.Err != nil {
			t.Fatalf("prefill leg: %v", pre.res.Err)
		}
		var o outcome
		select {
		case o = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("decode leg did not finish after its prefill")
		}
		if o.res.Err != nil || o.res.CachedTokens != 3*bs {
			t.Errorf("decode leg: err %v, cached %d; want a hit of %d", o.res.Err, o.res.CachedTokens, 3*bs)
		}
		if o.latency < waited {
			t.Errorf("decode leg took %v, less than the %v it waited for its prefill", o.latency, waited)
		}
		if ps := parkedOf(t, src, "pd-df"); ps.exists {
			t.Errorf("after the transfer the source still holds %+v", ps)
		}
	})
}

func TestPDParkedStoreIsReapedAtItsTimeout(t *testing.T) {
	const unbound = 400 * time.Millisecond
	tests := []struct {
		name   string
		policy LoadFailurePolicy
	}{
		{"a late fetch is refused at once and the decode leg fails (policy fail)", PolicyFail},
		{"a late fetch is refused at once and the decode leg prefills (policy recompute)", PolicyRecompute},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				src := startEngine(t, func(c *Config) { c.UnboundStoreTimeout = unbound })
				dec := startEngine(t, func(c *Config) { c.LoadFailure = tt.policy; c.LoadTimeout = 2 * time.Second })
				warm(t, src, dec)
				toks := prompt(fmt.Sprint(t.Name(), i), 3*src.cfg.BlockSize+1)
				id := fmt.Sprint("pd-reap-", i)
				parked := time.Now()
				run(t, src, prefillLeg(toks, id))
				// A deadline never fires early: parked and pinned until then.
				time.Sleep(unbound / 2)
				if ps := parkedOf(t, src, id); time.Since(parked) < unbound && (!ps.exists || ps.pinned != 3) {
					t.Fatalf("at %v (before the %v timeout) the source holds %+v", time.Since(parked), unbound, ps)
				}
				waitFor(t, "the parked store to be reaped", func() bool { return parkedOf(t, src, id).reaped })
				if at := time.Since(parked); at < unbound {
					t.Fatalf("reaped after %v, before its %v timeout", at, unbound)
				}
				if ps := parkedOf(t, src, id); ps.exists {
					t.Errorf("the reaped store is still held: %+v", ps)
				}
				if want := fmt.Sprintf("unbound store kv_request_id=%s timed out after 0.4s", id); !strings.Contains(src.log.String(), want) {
					t.Errorf("source log lacks %q:\n%s", want, src.log)
				}
				// The id is failed: its fetch is refused in one round trip, far
				// inside the decoder's load timeout (#53453).
				got := run(t, dec, decodeLeg(src, toks, id))
				if got.latency > time.Second {
					t.Errorf("the decode leg took %v: the refusal should come in one round trip, not at the %v load timeout", got.latency, 2*time.Second)
				}
				switch tt.policy {
				case PolicyFail:
					var le *LoadError
					if !errors.As(got.res.Err, &le) {
						t.Errorf("decode leg: err %v, want a LoadError", got.res.Err)
					}
				case PolicyRecompute:
					if got.res.Err != nil || got.res.CachedTokens != 0 {
						t.Errorf("decode leg: err %v, cached %d; want a local prefill", got.res.Err, got.res.CachedTokens)
					}
				}
				if !strings.Contains(src.log.String(), "fetch for kv_request_id="+id) {
					t.Errorf("source log lacks the refused fetch:\n%s", src.log)
				}
			})
		})
	}
}

// A load against a frozen prefiller on a ready session ends by the
// heartbeat (10 s of silence after a ping, ~12 s after the stop), never by
// the load timeout (30 s) and its abort (10 s more): with vLLM's defaults
// the heartbeat is always first. The test keeps those proportions.
func TestPDLoadFromAFrozenPrefillerEndsByTheHeartbeat(t *testing.T) {
	virtual(t, func(t *testing.T) {
		_, dec, got, end := frozenLoad(t, heartbeatFirst(func(c *Config) { c.LoadFailure = PolicyRecompute }), "pd-hb")
		cfg := dec.cfg
		if got.res.Err != nil || got.res.CachedTokens != 0 {
			t.Fatalf("decode leg: err %v, cached %d; want a local prefill after the failed load", got.res.Err, got.res.CachedTokens)
		}
		// The last frame from the source came at most one ping interval
		// before the stop; the session dies a heartbeat timeout after the
		// first ping left unanswered.
		if lo := cfg.HeartbeatTimeout - cfg.HeartbeatInterval; end < lo {
			t.Errorf("the load ended %v after the stop, before the heartbeat could fire (%v)", end, lo)
		}
		if end >= cfg.LoadTimeout {
			t.Errorf("the load ended %v after the stop, not before the %v load timeout", end, cfg.LoadTimeout)
		}
		log := dec.log.String()
		if !strings.Contains(log, "heartbeat timed out") || strings.Contains(log, "sending abort") {
			t.Errorf("decoder log: want the heartbeat to end the load, no abort:\n%s", log)
		}
	})
}

// heartbeatFirst is vLLM's default timing in its proportions, scaled down:
// a ping every 50 ms and a session dead after 250 ms of silence, well
// before the 750 ms load timeout and its 250 ms abort-ack; then mod.
func heartbeatFirst(mod func(*Config)) func(*Config) {
	return func(c *Config) {
		c.HeartbeatInterval = 50 * time.Millisecond
		c.HeartbeatTimeout = 250 * time.Millisecond
		c.LoadTimeout = 750 * time.Millisecond
		c.AbortAckTimeout = 250 * time.Millisecond
		mod(c)
	}
}

// frozenLoad starts a prefiller and a decoder with timing, warms their
// session, runs a prefill leg named id, freezes the prefiller and runs its
// decode leg: what the leg got, and how long after the freeze it ended.
func frozenLoad(t *testing.T, timing func(*Config), id string) (src, dec *driven, got outcome, end time.Duration) {
	t.Helper()
	src = startEngine(t, timing)
	dec = startEngine(t, timing)
	warm(t, src, dec)
	toks := prompt(t.Name(), 3*dec.cfg.BlockSize+1)
	run(t, src, prefillLeg(toks, id))
	src.setPaused(true)
	t.Cleanup(func() { src.setPaused(false) })
	stopped := time.Now()
	got = run(t, dec, decodeLeg(src, toks, id))
	return src, dec, got, time.Since(stopped)
}

// unackedLoad is frozenLoad whose decode leg must fail for an abort the
// frozen peer never acked.
func unackedLoad(t *testing.T, timing func(*Config), id string) (src, dec *driven, got outcome) {
	t.Helper()
	src, dec, got, _ = frozenLoad(t, timing, id)
	var le *LoadError
	if !errors.As(got.res.Err, &le) || !strings.Contains(le.Reason, "abort not acknowledged") {
		t.Fatalf("decode leg: err %v, want a load failed for an unacknowledged abort", got.res.Err)
	}
	return src, dec, got
}

// Under DeadLoadsTimeout (#56828's build) the same frozen prefiller's
// session still dies by the heartbeat, but the load outlives it: its load
// timeout sends an abort into the dead connection, nothing acks it, and
// it fails an abort-ack timeout later, load timeout + abort-ack after its
// submit. A decode leg after the reap opens a session of its own.
func TestPDLoadOutlivesItsSessionUnderDeadLoadsTimeout(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src, dec, got := unackedLoad(t, heartbeatFirst(func(c *Config) {
			c.LoadFailure = PolicyFail
			c.DeadSessionLoads = DeadLoadsTimeout
		}), "pd-orphan")
		cfg := dec.cfg
		if lo := cfg.LoadTimeout + cfg.AbortAckTimeout; got.latency < lo || got.latency > lo+2*cfg.Tick {
			t.Errorf("the load failed after %v, want load timeout + abort-ack timeout = %v after its submit", got.latency, lo)
		}
		log := dec.log.String()
		reaped := strings.Index(log, "peer "+src.ID()+" down: heartbeat timed out")
		kept := strings.Index(log, "session "+src.ID()+" died with 1 unacknowledged load(s)")
		abort := strings.Index(log, "pd-orphan timed out, sending abort")
		if reaped < 0 || kept < reaped || abort < kept || !strings.Contains(log, "abort_ack timed out for kv_request_id=pd-orphan") {
			t.Errorf("decoder log: want the heartbeat's reap, the load kept, then its abort and the abort-ack timeout, in that order:\n%s", log)
		}
		dec.inLoop(func(e *Engine) {
			if len(e.orphans) != 0 {
				t.Errorf("%d dead sessions still held after their last load ended", len(e.orphans))
			}
		})
	})
}

// With a heartbeat slower than the load timeout (not vLLM's defaults) the
// other mechanism shows: abort_fetch at the load timeout, and, the frozen
// peer never acking it, failure an abort-ack timeout later.
func TestPDLoadTimeoutAndAbortAckWhenTheHeartbeatIsSlower(t *testing.T) {
	virtual(t, func(t *testing.T) {
		timing := func(c *Config) {
			c.HeartbeatInterval = 100 * time.Millisecond
			c.HeartbeatTimeout = 3 * time.Second
			c.LoadTimeout = 300 * time.Millisecond
			c.AbortAckTimeout = 200 * time.Millisecond
			c.LoadFailure = PolicyFail
		}
		_, dec, got := unackedLoad(t, timing, "pd-abort")
		cfg := dec.cfg
		if lo := cfg.LoadTimeout + cfg.AbortAckTimeout; got.latency < lo || got.latency > lo+time.Second {
			t.Errorf("the load failed after %v, want load timeout + abort-ack timeout = %v (and well before the %v heartbeat)", got.latency, lo, cfg.HeartbeatTimeout)
		}
	})
}

// A live prefiller that never gets the prefill leg: the decode leg's fetch
// waits for blocks that never come; its load timeout sends abort_fetch and
// the live peer acks it at once.
func TestPDFetchWithoutItsPrefillEndsAtTheLoadTimeout(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, func(c *Config) { c.LoadFailure = PolicyRecompute })
		warm(t, src, dec)
		cfg := dec.cfg
		toks := prompt(t.Name(), 3*cfg.BlockSize+1)
		got := run(t, dec, decodeLeg(src, toks, "pd-never"))
		if got.res.Err != nil || got.res.CachedTokens != 0 {
			t.Fatalf("decode leg: err %v, cached %d; want a local prefill", got.res.Err, got.res.CachedTokens)
		}
		if got.latency < cfg.LoadTimeout || got.latency > cfg.LoadTimeout+cfg.AbortAckTimeout {
			t.Errorf("decode leg took %v, want the %v load timeout plus one round trip for the ack", got.latency, cfg.LoadTimeout)
		}
		if ps := parkedOf(t, src, "pd-never"); ps.exists {
			t.Errorf("the aborted demand is still held on the source: %+v", ps)
		}
	})
}

// The decode leg's fetch is queued until the session's connect_ack: a
// decode leg naming a prefiller with no session yet opens one and hits.
func TestPDFetchIsQueuedUntilTheHandshake(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		toks := prompt(t.Name(), 3*src.cfg.BlockSize+1)
		run(t, src, prefillLeg(toks, "pd-cold"))
		got := run(t, dec, decodeLeg(src, toks, "pd-cold"))
		if got.res.Err != nil || got.res.CachedTokens != 3*src.cfg.BlockSize {
			t.Errorf("first decode leg to a new peer: err %v, cached %d; want a hit", got.res.Err, got.res.CachedTokens)
		}
		if !strings.Contains(dec.log.String(), "peer "+src.ID()+" connected") {
			t.Errorf("decoder log lacks the handshake:\n%s", dec.log)
		}
	})
}

// A prefill leg that ends while a bound fetch still lacks blocks answers it
// failed at once (ServerRole.finish): here the decode leg asked for a
// prompt the prefill leg does not have.
func TestPDPrefillEndingWithoutTheDemandedBlocksFailsTheFetch(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, func(c *Config) { c.LoadTimeout = 3 * time.Second })
		warm(t, src, dec)
		bs := src.cfg.BlockSize
		ch := runAsync(dec, decodeLeg(src, prompt("asked", 3*bs+1), "pd-mismatch"))
		waitFor(t, "the fetch to bind the id", func() bool { return parkedOf(t, src, "pd-mismatch").bound })
		run(t, src, prefillLeg(prompt("computed", 3*bs+1), "pd-mismatch"))
		select {
		case o := <-ch:
			var le *LoadError
			if !errors.As(o.res.Err, &le) || le.Reason != "transfer failed at the source" {
				t.Errorf("decode leg: err %v, want the source's failed transfer", o.res.Err)
			}
			if o.latency > 2*time.Second {
				t.Errorf("decode leg took %v: the failure should come when the prefill ends, not at the load timeout", o.latency)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("decode leg did not end")
		}
		if ps := parkedOf(t, src, "pd-mismatch"); ps.exists {
			t.Errorf("the source still holds %+v", ps)
		}
	})
}

// Parked stores no fetch binds hold their CPU slots until their reap
// (unbound_store_timeout_s): once they fill the CPU tier, a later prefill
// leg parks nothing (vLLM's CPU policy evicts only blocks with ref_cnt 0,
// cpu/policies/lru.py evict, so the store is skipped), and its decode leg,
// arriving after the prefill ended, binds a demand nothing will meet and
// waits the load timeout (manager.py on_request_finished is a no-op while
// unbound). The reap frees the tier and pulls hit again. This is why the
// late-fetch case in PD mode recovers none of its pulls after a 30 s
// window: its 60 held fetches leave 60 stores parked for 60 s in a 50-block
// tier (docs/link.md, Presets).
func TestPDParkedStoresFillingTheCPUTierCostLaterDecodeLegsTheLoadTimeout(t *testing.T) {
	const unbound = 2 * time.Second
	virtual(t, func(t *testing.T) {
		src := startEngine(t, func(c *Config) { c.CPUBlocks = 9; c.UnboundStoreTimeout = unbound })
		dec := startEngine(t, func(c *Config) { c.LoadFailure = PolicyRecompute })
		warm(t, src, dec)
		bs := src.cfg.BlockSize
		// Three prefill legs whose fetches never come: 3 blocks each, the
		// tier's 9 slots all pinned.
		parkedAt := time.Now()
		for i := 0; i < 3; i++ {
			run(t, src, prefillLeg(prompt(fmt.Sprint(t.Name(), "-held-", i), 3*bs+1), fmt.Sprint("pd-held-", i)))
		}
		if ps := parkedOf(t, src, "pd-held-2"); ps.pinned != 3 {
			t.Fatalf("third held store: %+v, want its 3 blocks pinned", ps)
		}
		toks := prompt(t.Name()+"-after", 3*bs+1)
		run(t, src, prefillLeg(toks, "pd-after"))
		if ps := parkedOf(t, src, "pd-after"); ps.blocks != 0 {
			t.Fatalf("a prefill leg with every CPU slot pinned parked %+v, want nothing", ps)
		}
		got := run(t, dec, decodeLeg(src, toks, "pd-after"))
		if got.res.Err != nil || got.res.CachedTokens != 0 || got.latency < dec.cfg.LoadTimeout {
			t.Errorf("decode leg of the unparked prefill: err %v, cached %d after %v; want a local prefill after the %v load timeout",
				got.res.Err, got.res.CachedTokens, got.latency, dec.cfg.LoadTimeout)
		}
		waitFor(t, "the held stores to be reaped", func() bool { return parkedOf(t, src, "pd-held-0").reaped })
		if at := time.Since(parkedAt); at < unbound {
			t.Fatalf("reaped %v after parking, before the %v timeout", at, unbound)
		}
		toks = prompt(t.Name()+"-reaped", 3*bs+1)
		run(t, src, prefillLeg(toks, "pd-reaped"))
		if got := run(t, dec, decodeLeg(src, toks, "pd-reaped")); got.res.CachedTokens != 3*bs {
			t.Errorf("decode leg after the reap: err %v, cached %d; want its %d tokens pulled", got.res.Err, got.res.CachedTokens, 3*bs)
		}
	})
}
