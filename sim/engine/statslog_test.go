package engine

import (
	"strings"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/sim/simlog"
)

// steppedEngine is an engine without P2P stepped by the test on a fake
// clock, so interval arithmetic is exact.
func steppedEngine(t *testing.T, mutate func(*Config)) (*Engine, *syncbuf.Buffer, *time.Time) {
	t.Helper()
	cfg := testConfig()
	cfg.P2P = false
	cfg.StatsInterval = 10 * time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	log := &syncbuf.Buffer{}
	e, err := New(cfg, simlog.WithClock(log, func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e, log, &now
}

func tokens(base int32, n int) []int32 {
	ts := make([]int32, n)
	for i := range ts {
		ts[i] = base + int32(i)
	}
	return ts
}

func statsLines(log *syncbuf.Buffer) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "[loggers]") {
			out = append(out, l)
		}
	}
	return out
}

func TestStatsLineReportsThroughputQueuesAndHitRates(t *testing.T) {
	virtual(t, func(t *testing.T) {
		// No GPU cache: the repeat is served by the CPU tier, which vLLM counts
		// as an external (connector) hit.
		e, log, now := steppedEngine(t, func(c *Config) { c.GPUBlocks = 0 })
		step := func(d time.Duration) { *now = now.Add(d); e.Step(*now) }

		done := 0
		for range 2 {
			e.Submit(uint64(done+1), Request{Tokens: tokens(1, 160), MaxTokens: 4}, func(r Result) {
				if r.Err != nil {
					t.Errorf("request failed: %v", r.Err)
				}
				done++
			})
			step(time.Second)
		}
		if done != 2 {
			t.Fatalf("%d of 2 requests finished", done)
		}
		if got := statsLines(log); len(got) != 0 {
			t.Fatalf("stats logged before the interval ended: %q", got)
		}
		step(9 * time.Second) // 10 s after the first step
		got := statsLines(log)
		// 320 prompt tokens and 8 generated over 10 s; of 2 × 160 tokens asked
		// of the connector, 9 blocks of the repeat hit (never the whole prompt).
		want := "Engine 000: Avg prompt throughput: 32.0 tokens/s, Avg generation throughput: 0.8 tokens/s, " +
			"Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%, " +
			"External prefix cache hit rate: 45.0%"
		if len(got) != 1 || !strings.HasSuffix(got[0], want) || !strings.HasPrefix(got[0], "INFO ") {
			t.Fatalf("stats lines %q, want one ending %q", got, want)
		}

		// An idle interval after a busy one is still logged (throughput 0);
		// the next idle one is not.
		step(10 * time.Second)
		step(10 * time.Second)
		if got := statsLines(log); len(got) != 2 || !strings.Contains(got[1], "Avg prompt throughput: 0.0 tokens/s") {
			t.Fatalf("after two idle intervals: %q, want one more line with 0.0 tokens/s", got)
		}

		// A request still prefilling counts as running and holds its blocks:
		// chunks of 10 tokens, 100 ms a step, so each step below finds the
		// last chunk done and schedules the next.
		e.cfg.PrefillPerToken = 10 * time.Millisecond
		e.cfg.MaxNumBatchedTokens = 10
		e.Submit(9, Request{Tokens: tokens(1000, 100), MaxTokens: 12}, func(Result) {})
		step(time.Second)
		step(9 * time.Second)
		got = statsLines(log)
		if len(got) != 3 || !strings.Contains(got[2], "Running: 1 reqs, Waiting: 0 reqs") {
			t.Fatalf("with a request prefilling: %q, want Running: 1 reqs", got)
		}
	})
}

func TestStatsLineUsesGPUCacheAndCanBeTurnedOff(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e, log, now := steppedEngine(t, func(c *Config) { c.CPUBlocks = 0 })
		step := func(d time.Duration) { *now = now.Add(d); e.Step(*now) }
		for i := range 2 {
			e.Submit(uint64(i+1), Request{Tokens: tokens(1, 160), MaxTokens: 1}, func(Result) {})
			step(5 * time.Second)
		}
		step(5 * time.Second) // 10 s after the first step
		got := statsLines(log)
		// Without a CPU tier or P2P there is no connector: no external rate.
		if len(got) != 1 || !strings.HasSuffix(got[0], "Prefix cache hit rate: 45.0%") {
			t.Fatalf("stats lines %q, want one ending with a 45.0%% GPU hit rate and no external rate", got)
		}
		// A running request holds its prompt's and completion's blocks: 7
		// blocks of 16 for 100 + 12 tokens, of 256 GPU blocks.
		e.cfg.PrefillPerToken = time.Second
		e.Submit(9, Request{Tokens: tokens(1000, 100), MaxTokens: 12}, func(Result) {})
		step(10 * time.Second)
		if got := statsLines(log); len(got) != 2 || !strings.Contains(got[1], "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.7%") {
			t.Fatalf("with a request prefilling: %q, want GPU KV cache usage 2.7%%", got)
		}

		off, log, now := steppedEngine(t, func(c *Config) { c.StatsInterval = 0 })
		off.Submit(1, Request{Tokens: tokens(1, 160), MaxTokens: 1}, func(Result) {})
		for range 5 {
			*now = now.Add(10 * time.Second)
			off.Step(*now)
		}
		if got := statsLines(log); len(got) != 0 {
			t.Fatalf("StatsInterval 0 logged %q", got)
		}
	})
}

func TestHitRatesCoverTheLastThousandRequests(t *testing.T) {
	virtual(t, func(t *testing.T) {
		var s statsLog
		for range recentRequests {
			s.record(Stats{GPUQueryTokens: 100, GPUHitTokens: 100}, true, 1)
		}
		if r := rate(s.gpuH, s.gpuQ); r != 100 {
			t.Fatalf("rate after %d full hits = %.1f", recentRequests, r)
		}
		for range recentRequests / 4 {
			s.record(Stats{GPUQueryTokens: 100}, true, 1)
		}
		if r := rate(s.gpuH, s.gpuQ); r != 75 {
			t.Fatalf("rate after a quarter of misses = %.1f, want 75.0 (window of %d)", r, recentRequests)
		}
		if len(s.recent) != recentRequests {
			t.Fatalf("window holds %d samples", len(s.recent))
		}
	})
}

func TestStatsLineCountsRequestsWaitingOnAFrozenPeer(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		dec := startEngine(t, func(c *Config) {
			c.StatsInterval = 50 * time.Millisecond
			c.HandshakeTimeout = 2 * time.Second
		})
		// The source is frozen before the first pull, so the decoder's
		// handshake is pending for as long as it stays frozen: in wait mode
		// both pulls queue behind it.
		src.setPaused(true)
		a := runAsync(dec, pull(src, prompt(t.Name()+"a", 40), "a"))
		b := runAsync(dec, pull(src, prompt(t.Name()+"b", 40), "b"))
		waitFor(t, "a stats line with both pulls waiting", func() bool {
			return strings.Contains(dec.log.String(), "Running: 0 reqs, Waiting: 2 reqs")
		})
		src.setPaused(false)
		for _, ch := range []<-chan outcome{a, b} {
			select {
			case o := <-ch:
				if o.res.Err != nil {
					t.Errorf("pull failed: %v", o.res.Err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("pull did not end after the source resumed")
			}
		}
	})
}
