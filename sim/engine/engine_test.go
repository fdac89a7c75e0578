package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPullFromPeer(t *testing.T) {
	src := startEngine(t, nil)
	dec := startEngine(t, nil)
	other := startEngine(t, nil)
	bs := src.cfg.BlockSize

	tests := []struct {
		name       string
		tokens     int
		seed       bool
		from       *driven
		wantCached int
	}{
		{"a seeded prompt is pulled: every full block but the last token's", 3*bs + 5, true, src, 3 * bs},
		{"a prompt of exactly 3 blocks hits at most 2", 3 * bs, true, src, 2 * bs},
		{"a source that never saw the prompt gives no blocks", 3*bs + 5, false, other, 0},
		{"a prompt shorter than a block has nothing to pull", bs - 1, true, src, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks := prompt(tt.name, tt.tokens)
			if tt.seed {
				run(t, src, Request{Tokens: toks, MaxTokens: 1})
			}
			got := run(t, dec, pull(tt.from, toks, "req"+string(rune('a'+i))))
			if got.res.Err != nil {
				t.Fatalf("pull failed: %v", got.res.Err)
			}
			if got.res.CachedTokens != tt.wantCached {
				t.Errorf("cached tokens = %d, want %d", got.res.CachedTokens, tt.wantCached)
			}
			wantBytes := int64(tt.wantCached/bs) * src.blockBytes
			if got.res.Stats.P2PReadBytes != wantBytes {
				t.Errorf("P2P read bytes = %d, want %d", got.res.Stats.P2PReadBytes, wantBytes)
			}
		})
	}
	if !strings.Contains(dec.log.String(), "peer "+src.ID()+" connected") {
		t.Errorf("decoder log lacks %q:\n%s", "peer "+src.ID()+" connected", dec.log)
	}
}

func TestLocalTiersAnswerBeforeThePeer(t *testing.T) {
	bs := testConfig().BlockSize
	tests := []struct {
		name      string
		gpuBlocks int
		wantGPU   int
		wantExt   int
	}{
		{"a repeated prompt hits the GPU prefix cache", 256, 3 * bs, 0},
		{"evicted from a small GPU cache it hits the CPU tier", 2, 0, 3 * bs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				e := startEngine(t, func(c *Config) { c.GPUBlocks = tt.gpuBlocks; c.P2P = false })
				toks := prompt(tt.name, 3*bs+1)
				run(t, e, Request{Tokens: toks, MaxTokens: 1})
				if tt.gpuBlocks < 4 {
					run(t, e, Request{Tokens: prompt("evict", 3*bs+1), MaxTokens: 1})
				}
				got := run(t, e, Request{Tokens: toks, MaxTokens: 1})
				if got.res.CachedTokens != 3*bs {
					t.Errorf("cached = %d, want %d", got.res.CachedTokens, 3*bs)
				}
				if got.res.Stats.GPUHitTokens != tt.wantGPU || got.res.Stats.ExternalHitTokens != tt.wantExt {
					t.Errorf("GPU hits %d, external hits %d; want %d, %d", got.res.Stats.GPUHitTokens, got.res.Stats.ExternalHitTokens, tt.wantGPU, tt.wantExt)
				}
			})
		})
	}
}

func TestHandshakeRefusals(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"different hash seeds refuse each other", func(c *Config) { c.HashSeed = "7" }, "hash seed mismatch"},
		{"a different TP size changes the fingerprint", func(c *Config) { c.TPSize = 2 }, "config fingerprint mismatch"},
		{"a different block size changes block_len", func(c *Config) { c.BlockSize *= 2 }, "block_len mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				src := startEngine(t, nil)
				dec := startEngine(t, tt.mutate)
				toks := prompt(tt.name, 50)
				run(t, src, Request{Tokens: toks, MaxTokens: 1})
				got := run(t, dec, pull(src, toks, "x"))
				if got.res.Err != nil || got.res.CachedTokens != 0 {
					t.Fatalf("got cached %d err %v, want a local prefill", got.res.CachedTokens, got.res.Err)
				}
				// Both sides log vLLM's protocol error on the other's connect.
				for name, e := range map[string]*driven{"source": src, "decoder": dec} {
					if want := "rejecting peer connect: " + tt.want; !strings.Contains(e.log.String(), want) {
						t.Errorf("%s log lacks %q:\n%s", name, want, e.log)
					}
				}
			})
		})
	}
}

func TestUnreachablePeerMissesAtOnce(t *testing.T) {
	for _, mode := range []PendingMode{PendingWait, PendingPrefill} {
		t.Run(mode.String(), func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				port := freePort(t) // nothing listens there now: connects are refused
				dec := startEngine(t, func(c *Config) { c.PendingHandshake = mode })
				for i := 0; i < 3; i++ {
					got := run(t, dec, Request{Tokens: prompt(fmt.Sprint("x", i), 40), MaxTokens: 1,
						Source: &RemoteSource{KVRequestID: "r", Host: "127.0.0.1", Port: port}})
					if got.res.CachedTokens != 0 || got.res.Err != nil {
						t.Fatalf("cached %d err %v", got.res.CachedTokens, got.res.Err)
					}
					// Well under the handshake timeout a pending session would wait.
					if got.latency > dec.cfg.HandshakeTimeout/2 {
						t.Errorf("pull to a refused peer took %v, want well under the handshake timeout %v", got.latency, dec.cfg.HandshakeTimeout)
					}
				}
				// In prefill mode the pull may finish before the dial's result
				// is handled.
				waitFor(t, "the refused connect in the log", func() bool {
					return strings.Contains(dec.log.String(), "down: connection refused")
				})
			})
		})
	}
}

func TestPeerShutdownDisconnects(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		toks := prompt("warm", 40)
		run(t, src, Request{Tokens: toks, MaxTokens: 1})
		if got := run(t, dec, pull(src, toks, "w")); got.res.CachedTokens == 0 {
			t.Fatal("warm-up pull did not hit")
		}
		// The source's ROUTER closes: the decoder's DEALER reports
		// EVENT_DISCONNECTED at once (no disconnect message is sent).
		src.shutdown()
		waitFor(t, "the decoder to see the disconnect", func() bool {
			return strings.Contains(dec.log.String(), "peer "+src.ID()+" down: connection closed by peer")
		})
		got := run(t, dec, pull(src, prompt("after", 40), "a"))
		if got.res.CachedTokens != 0 || got.latency > dec.cfg.HandshakeTimeout/2 {
			t.Errorf("pull after shutdown: cached %d in %v, want 0 well under the handshake timeout %v", got.res.CachedTokens, got.latency, dec.cfg.HandshakeTimeout)
		}
	})
}

func TestLoadFailurePolicy(t *testing.T) {
	tests := []struct {
		name    string
		policy  LoadFailurePolicy
		wantErr bool
	}{
		{"fail: the request errors after load and abort timeouts", PolicyFail, true},
		{"recompute: the request prefills locally", PolicyRecompute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				// A source this slow never finishes a transfer in time.
				src := startEngine(t, func(c *Config) { c.TransferBandwidth = 1 })
				dec := startEngine(t, func(c *Config) { c.LoadFailure = tt.policy; c.LookupTimeout = time.Second })
				toks := prompt(tt.name, 40)
				run(t, src, Request{Tokens: toks, MaxTokens: 1})
				got := run(t, dec, pull(src, toks, "slow"))
				var le *LoadError
				if tt.wantErr != errors.As(got.res.Err, &le) {
					t.Fatalf("err = %v, want a load error: %v", got.res.Err, tt.wantErr)
				}
				if !tt.wantErr && got.res.CachedTokens != 0 {
					t.Errorf("recomputed request reports %d cached tokens", got.res.CachedTokens)
				}
				// Load timeout, then abort: the source acks the abort at once.
				lo, hi := dec.cfg.LoadTimeout, dec.cfg.LoadTimeout+dec.cfg.AbortAckTimeout+500*time.Millisecond
				if got.latency < lo || got.latency > hi {
					t.Errorf("load failed after %v, want in [%v, %v]", got.latency, lo, hi)
				}
				if !strings.Contains(dec.log.String(), "timed out, sending abort (load timeout 0.3s)") {
					t.Errorf("decoder log lacks the abort:\n%s", dec.log)
				}
			})
		})
	}
}

func TestLookupHeldWhileTheSourceComputes(t *testing.T) {
	virtual(t, func(t *testing.T) {
		// 400 ms of prefill on the source: a pull sent meanwhile is held
		// (vLLM's HIT_PENDING, here up to 2 s, so a loaded machine's slow
		// prefill still ends within the hold) and hits once the blocks are
		// stored.
		src := startEngine(t, func(c *Config) { c.PrefillPerToken = 10 * time.Millisecond; c.LookupHold = 2 * time.Second })
		dec := startEngine(t, func(c *Config) { c.LookupTimeout = 5 * time.Second })
		toks := prompt("held", 40)
		run(t, dec, pull(src, prompt("warm", 40), "w")) // handshake first
		seededAt := time.Now()
		seeded := runAsync(src, Request{Tokens: toks, MaxTokens: 1})
		time.Sleep(100 * time.Millisecond)
		got := run(t, dec, pull(src, toks, "p"))
		// From the seed, not the pull: on a loaded machine the pull may be sent
		// well after the 100 ms, and the blocks are stored no sooner.
		answered := time.Since(seededAt)
		if got.res.CachedTokens != 32 {
			t.Errorf("held pull cached %d, want 32", got.res.CachedTokens)
		}
		if answered < 300*time.Millisecond {
			t.Errorf("held pull returned %v after the seed was sent, before the source could have stored its blocks (400 ms of prefill)", answered)
		}
		<-seeded
	})
}

func TestHeartbeatReapsASilentPeer(t *testing.T) {
	virtual(t, func(t *testing.T) {
		// No pull is in flight, so only the heartbeat can notice the freeze:
		// the first unanswered ping plus the heartbeat timeout.
		src := startEngine(t, nil)
		dec := startEngine(t, nil)
		toks := prompt("hb", 40)
		run(t, src, Request{Tokens: toks, MaxTokens: 1})
		if got := run(t, dec, pull(src, toks, "hb")); got.res.CachedTokens == 0 {
			t.Fatal("warm-up pull did not hit")
		}
		frozen := time.Now()
		src.setPaused(true)
		t.Cleanup(func() { src.setPaused(false) })
		want := "peer " + src.ID() + " down: heartbeat timed out after 0.4s"
		waitFor(t, "the heartbeat to reap the session", func() bool { return strings.Contains(dec.log.String(), want) })
		// The timeout counts from the first unanswered ping, which may have
		// been sent up to an interval before the freeze.
		lo := dec.cfg.HeartbeatTimeout - dec.cfg.HeartbeatInterval
		if d := time.Since(frozen); d < lo {
			t.Errorf("session reaped %v after the freeze, before the heartbeat timeout %v less an interval", d, dec.cfg.HeartbeatTimeout)
		}
	})
}

func TestCancelledRequestIsDropped(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := startEngine(t, func(c *Config) { c.PrefillPerToken = 10 * time.Millisecond; c.P2P = false })
		called := make(chan Result, 1)
		e.Submit(1, Request{Tokens: prompt("c", 40), MaxTokens: 1}, func(r Result) { called <- r })
		e.Cancel(1)
		select {
		case r := <-called:
			t.Errorf("a cancelled request reported %+v", r)
		case <-time.After(800 * time.Millisecond): // its prefill would take 400 ms
		}
		// Its id is free again, and a duplicate in flight is refused.
		first := make(chan Result, 1)
		e.Submit(1, Request{Tokens: prompt("d", 40), MaxTokens: 1}, func(r Result) { first <- r })
		dup := make(chan Result, 1)
		e.Submit(1, Request{Tokens: prompt("e", 40), MaxTokens: 1}, func(r Result) { dup <- r })
		if r := <-dup; !errors.Is(r.Err, ErrDuplicateID) {
			t.Errorf("duplicate id: %v, want ErrDuplicateID", r.Err)
		}
		if r := <-first; r.Err != nil {
			t.Errorf("reused id failed: %v", r.Err)
		}
	})
}

func TestRefusedConnectsAreSummarizedNotLoggedEach(t *testing.T) {
	virtual(t, func(t *testing.T) {
		port := freePort(t) // nothing listens there until the source starts below
		dec := startEngine(t, nil)
		peer := fmt.Sprintf("127.0.0.1:%d", port)
		pullN := func(i int) {
			got := run(t, dec, Request{Tokens: prompt(fmt.Sprint(t.Name(), i), 40), MaxTokens: 1,
				Source: &RemoteSource{KVRequestID: fmt.Sprint("r", i), Host: "127.0.0.1", Port: port}})
			if got.res.Err != nil || got.res.CachedTokens != 0 {
				t.Fatalf("pull %d: cached %d err %v", i, got.res.CachedTokens, got.res.Err)
			}
		}
		for i := range 5 {
			pullN(i)
		}
		if n := strings.Count(dec.log.String(), "peer "+peer+" down: connection refused"); n != 1 {
			t.Fatalf("%d 'down: connection refused' lines for 5 refused connects, want 1:\n%s", n, dec.log.String())
		}
		time.Sleep(dec.cfg.HeartbeatTimeout)
		pullN(5)
		if !strings.Contains(dec.log.String(), "peer "+peer+" still down: 5 connects refused in the last") {
			t.Fatalf("no summary of the refused connects after a heartbeat timeout:\n%s", dec.log.String())
		}
		startEngine(t, func(c *Config) { c.P2PPort = port })
		pullN(6)
		waitFor(t, "the connect after the refusals", func() bool {
			return strings.Contains(dec.log.String(), "peer "+peer+" connected (6 connects refused while it was down)")
		})
		pullN(7)
		if n := strings.Count(dec.log.String(), "peer "+peer+" connected"); n != 1 {
			t.Errorf("%d connected lines, want 1", n)
		}
	})
}
