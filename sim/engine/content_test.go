package engine

import (
	"fmt"
	"testing"
	"time"

	"p2pfault/sim/kv"
)

// The decode reads the KV the request holds; Result.KV is its digest, and
// the front end's text is a function of it alone.

func TestAPullDecodesWhatALocalPrefillDecodes(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		alone := startEngine(t, func(c *Config) { c.P2P = false })
		warm(t, src, dec)
		bs := src.cfg.BlockSize
		for i, n := range []int{3*bs + 5, 3 * bs, bs - 1} {
			toks := prompt(fmt.Sprint(t.Name(), i), n)
			own := run(t, src, Request{Tokens: toks, MaxTokens: 1})
			local := run(t, alone, Request{Tokens: toks, MaxTokens: 1})
			pulled := run(t, dec, pull(src, toks, fmt.Sprint("c", i)))
			if n > bs && pulled.res.CachedTokens == 0 {
				t.Fatalf("%d tokens: the pull did not hit", n)
			}
			if pulled.res.KV != own.res.KV || local.res.KV != own.res.KV {
				t.Errorf("%d tokens: KV digests source %x, local prefill %x, pull %x; want one", n, own.res.KV, local.res.KV, pulled.res.KV)
			}
			// Decoded again from the decoder's own tiers (GPU prefix cache).
			again := run(t, dec, Request{Tokens: toks, MaxTokens: 1})
			if again.res.KV != own.res.KV {
				t.Errorf("%d tokens: a repeat on the decoder decodes %x, want %x", n, again.res.KV, own.res.KV)
			}
		}
		// A PD exchange decodes the same as well.
		toks := prompt(t.Name()+"-pd", 3*bs+5)
		pre := run(t, src, prefillLeg(toks, "c-pd"))
		got := run(t, dec, decodeLeg(src, toks, "c-pd"))
		if got.res.CachedTokens != 3*bs || got.res.KV != pre.res.KV {
			t.Errorf("PD decode leg: cached %d KV %x, prefill leg KV %x", got.res.CachedTokens, got.res.KV, pre.res.KV)
		}
		// Another prompt decodes otherwise.
		if other := run(t, alone, Request{Tokens: prompt("other", 3*bs+5), MaxTokens: 1}); other.res.KV == pre.res.KV {
			t.Errorf("two prompts decode the same KV %x", other.res.KV)
		}
	})
}

// swapBlock makes the source's copy of block i of a hold the content of
// block i of b: what a wrong block under the decoder looks like.
func swapBlock(t *testing.T, src *driven, a, b []int32, i int) {
	t.Helper()
	ha := kv.BlockHashes(src.cfg.HashSeed, "", a, src.cfg.BlockSize)[i]
	db := kv.BlockDigests(b, src.cfg.BlockSize)[i]
	inspect(t, src, func() {
		src.cpu.Remove(ha)
		src.cpu.Insert(ha, db)
	})
}

func TestABlockSwappedUnderTheDecoderChangesItsOutput(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		warm(t, src, dec)
		bs := src.cfg.BlockSize
		a, b := prompt("swap-a", 3*bs+5), prompt("swap-b", 3*bs+5)
		own := run(t, src, Request{Tokens: a, MaxTokens: 1})
		run(t, src, Request{Tokens: b, MaxTokens: 1})
		swapBlock(t, src, a, b, 1)
		got := run(t, dec, pull(src, a, "swapped"))
		if got.res.CachedTokens != 3*bs {
			t.Fatalf("the pull cached %d tokens, want a full hit of %d", got.res.CachedTokens, 3*bs)
		}
		if got.res.KV == own.res.KV {
			t.Errorf("a pull that loaded another prompt's block decodes the source's own KV %x", own.res.KV)
		}
	})
}

// outcomes of one scenario without and with a defect: the decoder's KV
// must equal the source's own without it, and differ with it.
func checkDefect(t *testing.T, name string, run func(t *testing.T, d Defects) (own, pulled outcome), d Defects) {
	t.Helper()
	// Each arm runs on the fake clock (virtual): a trigger is a timeout
	// lapsing, and what happens within one more timeout after it must not
	// depend on how busy the machine is.
	t.Run(name+"/without the defect the decoder decodes the source's KV", func(t *testing.T) {
		virtual(t, func(t *testing.T) {
			own, pulled := run(t, Defects{})
			if pulled.res.Err != nil || pulled.res.KV != own.res.KV {
				t.Errorf("decoder: err %v KV %x; source's own KV %x", pulled.res.Err, pulled.res.KV, own.res.KV)
			}
		})
	})
	t.Run(name+"/with the defect it decodes other KV", func(t *testing.T) {
		virtual(t, func(t *testing.T) {
			own, pulled := run(t, d)
			if pulled.res.Err != nil || pulled.res.KV == own.res.KV {
				t.Errorf("decoder: err %v KV %x; source's own KV %x: the defect did not show", pulled.res.Err, pulled.res.KV, own.res.KV)
			}
		})
	})
}

func TestDefectsShowOnlyUnderTheirTrigger(t *testing.T) {
	// The timeouts whose lapse triggers reuse-freed-blocks. Each scenario
	// waits until the source's step has seen its timeout, and then has one
	// more timeout — the defect keeps the freed record that long — to store
	// other prompts and fetch: on the fake clock (checkDefect) that takes
	// only the steps' ticks.
	const storeTO = time.Second
	fillAfterFree := func(t *testing.T, src *driven, tag string) {
		// Other prompts stored after the free take the freed slots.
		for i := 0; i < 3; i++ {
			run(t, src, Request{Tokens: prompt(fmt.Sprint(tag, i), 3*src.cfg.BlockSize+1), MaxTokens: 1})
		}
	}

	// reuse-freed-blocks, p2p: the lookup's pin times out before the fetch
	// (the decoder is frozen between the answer and its fetch).
	checkDefect(t, "reuse-freed-blocks: a fetch after its lookup's pin timed out", func(t *testing.T, d Defects) (outcome, outcome) {
		src := startEngine(t, func(c *Config) { c.StoreTimeout = storeTO; c.HeartbeatTimeout = 5 * time.Second; c.Defects = d })
		dec := startEngine(t, func(c *Config) {
			c.LookupTimeout = 5 * time.Second
			c.HeartbeatTimeout = 5 * time.Second
			c.LoadTimeout = 5 * time.Second
		})
		warm(t, src, dec)
		toks := prompt(t.Name(), 3*src.cfg.BlockSize+5)
		own := run(t, src, Request{Tokens: toks, MaxTokens: 1})
		// The lookup waits at the frozen source; the decoder freezes; the
		// source answers it (and pins the hits), then its pin times out
		// and other prompts are stored before the decoder sends its fetch.
		src.setPaused(true)
		ch := runAsync(dec, pull(src, toks, "late"))
		waitFor(t, "the decoder to send its lookup", func() bool {
			var n int
			inspect(t, dec, func() {
				if s := dec.sessions[src.ID()]; s != nil {
					n = len(s.lookups)
				}
			})
			return n > 0
		})
		dec.setPaused(true)
		src.setPaused(false)
		waitFor(t, "the source to pin the hits", func() bool {
			var n int
			inspect(t, src, func() { n = len(src.pins) })
			return n > 0
		})
		// The pin's store timeout lapses (with the defect its slots are
		// freed at once); its record is kept one more timeout.
		waitFor(t, "the source's pin to time out", func() bool {
			lapsed := false
			inspect(t, src, func() {
				for _, p := range src.pins {
					lapsed = lapsed || p.lapsed
				}
			})
			return lapsed
		})
		fillAfterFree(t, src, t.Name()+"-other")
		dec.setPaused(false)
		var got outcome
		select {
		case got = <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the pull did not end")
		}
		if got.res.CachedTokens == 0 {
			t.Errorf("the late fetch did not hit (cached 0): the scenario did not reach the served fetch")
		}
		return own, got
	}, Defects{ReuseFreedBlocks: true})

	// reuse-freed-blocks, PD: the parked store is reaped before its fetch.
	checkDefect(t, "reuse-freed-blocks: a decode leg after its parked store was reaped", func(t *testing.T, d Defects) (outcome, outcome) {
		src := startEngine(t, func(c *Config) { c.UnboundStoreTimeout = storeTO; c.Defects = d })
		dec := startEngine(t, func(c *Config) { c.LoadFailure = PolicyRecompute })
		warm(t, src, dec)
		toks := prompt(t.Name(), 3*src.cfg.BlockSize+5)
		own := run(t, src, prefillLeg(toks, "reaped"))
		// The unbound-store timeout reaps the parked store: its id failed,
		// or with the defect its slots freed and the store kept parked
		// until twice the timeout after it parked.
		waitFor(t, "the source to reap the parked store", func() bool {
			done := false
			inspect(t, src, func() {
				_, failed := src.reaped["reaped"]
				st := src.parked["reaped"]
				done = failed || (st != nil && st.freed)
			})
			return done
		})
		fillAfterFree(t, src, t.Name()+"-other")
		return own, run(t, dec, decodeLeg(src, toks, "reaped"))
	}, Defects{ReuseFreedBlocks: true})

	// recompute-keeps-partial: the decode leg's load fails (the prefiller
	// is frozen: the heartbeat reaps the session) and it recomputes.
	checkDefect(t, "recompute-keeps-partial: a failed load recomputed", func(t *testing.T, d Defects) (outcome, outcome) {
		src := startEngine(t, nil)
		dec := startEngine(t, func(c *Config) {
			c.LoadFailure = PolicyRecompute
			c.HeartbeatInterval, c.HeartbeatTimeout, c.LoadTimeout = 50*time.Millisecond, 250*time.Millisecond, 2*time.Second
			c.Defects = d
		})
		warm(t, src, dec)
		// The decoder's slots held other prompts before.
		for i := 0; i < 3; i++ {
			toks := prompt(fmt.Sprint(t.Name(), "-before-", i), 3*src.cfg.BlockSize+1)
			run(t, src, Request{Tokens: toks, MaxTokens: 1})
			run(t, dec, pull(src, toks, fmt.Sprint("before-", i)))
		}
		toks := prompt(t.Name(), 3*src.cfg.BlockSize+5)
		own := run(t, src, prefillLeg(toks, "failing"))
		src.setPaused(true)
		defer src.setPaused(false)
		return own, run(t, dec, decodeLeg(src, toks, "failing"))
	}, Defects{RecomputeKeepsPartial: true})

	// Healthy exchanges with every defect on: nothing changes.
	t.Run("healthy pulls and PD exchanges with both defects on decode the source's KV", func(t *testing.T) { virtual(t, testHealthyExchangesWithBothDefects) })
}

func testHealthyExchangesWithBothDefects(t *testing.T) {
	both := Defects{ReuseFreedBlocks: true, RecomputeKeepsPartial: true}
	// Timeouts far above a step, so that no trigger happens
	// (testConfig's are of a few hundred ms, and a load timeout under
	// recompute-keeps-partial is a trigger).
	calm := func(c *Config) {
		c.Defects = both
		c.HandshakeTimeout, c.LookupTimeout, c.LookupHold = 10*time.Second, 10*time.Second, 10*time.Second
		c.HeartbeatTimeout, c.LoadTimeout, c.AbortAckTimeout = 10*time.Second, 10*time.Second, 5*time.Second
		c.FreezeGap = time.Minute
	}
	src := startEngine(t, calm)
	dec := startEngine(t, func(c *Config) { calm(c); c.LoadFailure = PolicyRecompute })
	warm(t, src, dec)
	for i := 0; i < 20; i++ {
		toks := prompt(fmt.Sprint(t.Name(), i), 3*src.cfg.BlockSize+5)
		own := run(t, src, Request{Tokens: toks, MaxTokens: 1})
		got := run(t, dec, pull(src, toks, fmt.Sprint("h", i)))
		if got.res.CachedTokens == 0 || got.res.KV != own.res.KV {
			t.Errorf("pull %d: cached %d KV %x, source's %x", i, got.res.CachedTokens, got.res.KV, own.res.KV)
		}
		pdToks := prompt(fmt.Sprint(t.Name(), "-pd-", i), 3*src.cfg.BlockSize+5)
		pre := run(t, src, prefillLeg(pdToks, fmt.Sprint("hpd", i)))
		pd := run(t, dec, decodeLeg(src, pdToks, fmt.Sprint("hpd", i)))
		if pd.res.CachedTokens == 0 || pd.res.KV != pre.res.KV {
			t.Errorf("PD %d: cached %d KV %x, prefill's %x", i, pd.res.CachedTokens, pd.res.KV, pre.res.KV)
		}
	}
}
