package engine

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

type pullSample struct {
	start, end time.Duration // since the freeze
	cached     int
	err        error
}

// stallRun freezes src for stall while pulls naming it start every
// interval until horizon, and returns them in start order.
func stallRun(t *testing.T, src, dec *driven, stall, interval, horizon time.Duration) []pullSample {
	t.Helper()
	n := int(horizon / interval)
	prompts := make([][]int32, n)
	var seeds []<-chan outcome
	for i := range prompts {
		prompts[i] = prompt(fmt.Sprintf("%s-stall-%d", t.Name(), i), 40)
		seeds = append(seeds, runAsync(src, Request{Tokens: prompts[i], MaxTokens: 1}))
	}
	for _, s := range seeds {
		<-s
	}
	warm(t, src, dec)
	out := make([]pullSample, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	src.setPaused(true)
	time.AfterFunc(stall, func() { src.setPaused(false) })
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		start := time.Since(t0)
		ch := runAsync(dec, pull(src, prompts[i], fmt.Sprint("p", i)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := <-ch
			out[i] = pullSample{start: start, end: start + o.latency, cached: o.res.CachedTokens, err: o.res.Err}
		}(i)
	}
	wg.Wait()
	return out
}

// phase is a span of pull start times (since the freeze) and what pulls
// started in it must show. must holds for every pull: it follows from
// deadlines, which a loaded machine can delay but never advance. most holds
// for at least 80% of them: it has an upper bound a starved process can
// miss.
type phase struct {
	name       string
	from, to   time.Duration
	must, most func(s pullSample) string
}

func TestStallPendingHandshake(t *testing.T) {
	const (
		stall    = 800 * time.Millisecond
		interval = 10 * time.Millisecond
		slack    = 300 * time.Millisecond // scheduling noise on a shared machine
		edge     = 60 * time.Millisecond  // pulls this close to a phase change are not judged
	)
	mutate := func(c *Config) {
		c.LookupTimeout = 200 * time.Millisecond
		c.HandshakeTimeout = 800 * time.Millisecond
		c.FreezeGap = 300 * time.Millisecond
	}
	cfg := testConfig()
	mutate(&cfg)
	L, H := cfg.LookupTimeout, cfg.HandshakeTimeout
	endsBy := func(lo, hi time.Duration) func(s pullSample) string {
		return func(s pullSample) string {
			if s.end < lo || s.end > hi {
				return fmt.Sprintf("want it to end in [%v, %v]", lo, hi)
			}
			return ""
		}
	}
	notBefore := func(lo time.Duration) func(s pullSample) string {
		return func(s pullSample) string {
			if s.end < lo {
				return fmt.Sprintf("ended before %v, when no deadline had fired", lo)
			}
			if s.cached != 0 {
				return "hit a frozen source"
			}
			return ""
		}
	}
	fast := func(s pullSample) string {
		if d := s.end - s.start; d > L/2 {
			return fmt.Sprintf("took %v, want under %v (a local prefill)", d, L/2)
		}
		return ""
	}
	hit := func(s pullSample) string {
		if s.cached == 0 {
			return "want a hit once the next handshake succeeded"
		}
		return ""
	}
	none := func(pullSample) string { return "" }
	inFlight := phase{"in flight at the freeze: reaped on the lookup timeout", 0, L - edge, notBefore(L), endsBy(L, L+slack)}
	tests := []struct {
		name       string
		mode       PendingMode
		staleRoute bool
		phases     []phase
	}{
		{"wait: in-flight pulls end on the lookup timeout, later ones on the dropped handshake", PendingWait, true, []phase{
			inFlight,
			// The reconnect's connect, sent while frozen, is dropped into
			// the stale route at resume: it runs to its deadline.
			{"meeting the reconnect", L + edge, L + H - edge, notBefore(L + H), endsBy(L+H, L+H+slack)},
			{"after the reconnect's deadline", L + H + edge, L + H + 300*time.Millisecond, none, hit},
		}},
		{"prefill: pulls meeting the pending handshake prefill at once", PendingPrefill, true, []phase{
			inFlight,
			{"meeting the reconnect", L + edge, L + H - edge, none, fast},
			{"after the reconnect's deadline", L + H + edge, L + H + 300*time.Millisecond, none, hit},
		}},
		{"wait without the stale-route gap: the reconnect succeeds at resume", PendingWait, false, []phase{
			inFlight,
			{"meeting the reconnect", L + edge, stall - edge, func(s pullSample) string {
				if s.end < stall {
					return fmt.Sprintf("ended before the resume at %v", stall)
				}
				return ""
			}, func(s pullSample) string {
				if msg := endsBy(stall, stall+slack)(s); msg != "" {
					return msg
				}
				return hit(s)
			}},
			{"after the resume", stall + edge, L + H + 300*time.Millisecond, none, hit},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startEngine(t, func(c *Config) { mutate(c); c.StaleRoute = tt.staleRoute })
			dec := startEngine(t, func(c *Config) { mutate(c); c.PendingHandshake = tt.mode })
			samples := stallRun(t, src, dec, stall, interval, L+H+300*time.Millisecond)
			for _, ph := range tt.phases {
				n, good := 0, 0
				for _, s := range samples {
					if s.start < ph.from || s.start >= ph.to {
						continue
					}
					n++
					if s.err != nil {
						t.Errorf("%s: pull at %v failed: %v", ph.name, s.start, s.err)
						continue
					}
					if msg := ph.must(s); msg != "" {
						t.Errorf("%s: pull at %v ended at %v (cached %d): %s", ph.name, s.start, s.end, s.cached, msg)
					}
					if msg := ph.most(s); msg == "" {
						good++
					} else {
						t.Logf("%s: pull at %v ended at %v (cached %d): %s", ph.name, s.start, s.end, s.cached, msg)
					}
				}
				if n < 5 || good*10 < n*8 {
					t.Errorf("%s: %d of %d pulls as expected, want ≥ 80%% of ≥ 5", ph.name, good, n)
				}
			}
			if t.Failed() {
				t.Logf("decoder log:\n%s\nsource log:\n%s", dec.log, src.log)
			}
			srcLog, decLog := src.log.String(), dec.log.String()
			if !strings.Contains(srcLog, "engine resumed after") {
				t.Errorf("source log lacks the resume line:\n%s", srcLog)
			}
			if want := "lookup on " + src.ID() + " timed out after 0.2s"; !strings.Contains(decLog, want) {
				t.Errorf("decoder log lacks %q", want)
			}
			stale := "connect from " + dec.ID() + " routed to a stale connection and dropped"
			if strings.Contains(srcLog, stale) != tt.staleRoute {
				t.Errorf("source log has %q: %v, want %v", stale, !tt.staleRoute, tt.staleRoute)
			}
			if want := "handshake with " + src.ID() + " timed out after 0.8s"; strings.Contains(decLog, want) != tt.staleRoute {
				t.Errorf("decoder log has %q: %v, want %v", want, !tt.staleRoute, tt.staleRoute)
			}
		})
	}
}

// warm pulls until one hits, so the session is handshaken (in prefill mode
// the first pull only starts the handshake), as the experiment's warm-up does.
func warm(t *testing.T, src, dec *driven) {
	t.Helper()
	for i := 0; i < 100; i++ {
		toks := prompt(fmt.Sprintf("%s-warm-%d", t.Name(), i), 40)
		run(t, src, Request{Tokens: toks, MaxTokens: 1})
		if got := run(t, dec, pull(src, toks, "warm")); got.res.CachedTokens > 0 {
			return
		}
		time.Sleep(src.cfg.Tick)
	}
	t.Fatalf("no pull from %s hit during warm-up", src.ID())
}
