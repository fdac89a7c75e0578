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

// noise is what a run measured of the machine, which the phases' bounds
// allow for, never a guess:
//   - lead: how long before the freeze the decoder may last have heard
//     from the source. Its lookup deadline counts from that frame, so it
//     (and what follows it) can come up to lead before the same deadline
//     counted from the freeze.
//   - late: the decoder's longest wait between two steps. A deadline fires
//     at the first step at or after it, so up to late after it was due; a
//     starved engine also answers that much later.
type noise struct{ lead, late time.Duration }

// stallRun freezes src for stall while pulls naming it start every
// interval until horizon, and returns them in start order, with the noise
// the run measured.
func stallRun(t *testing.T, src, dec *driven, stall, interval, horizon time.Duration) ([]pullSample, noise) {
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
	dec.resetGap()
	src.setPaused(true)
	time.AfterFunc(stall, func() { src.setPaused(false) })
	// When the decoder last heard src, read after the freeze: frames still
	// on their way only make it later, never earlier.
	var heard time.Time
	dec.inLoop(func(e *Engine) {
		if s := e.sessions[src.ID()]; s != nil {
			heard = s.heard
		}
	})
	if heard.IsZero() {
		t.Fatal("the decoder has no session with the source after the warm-up")
	}
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		start := time.Since(t0)
		ch := runAsync(dec, pull(src, prompts[i], fmt.Sprint("p", i)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := <-ch
			// The end is when the engine answered, not start + latency:
			// this goroutine may be preempted between taking start and
			// submitting, which would date the end early.
			out[i] = pullSample{start: start, end: o.at.Sub(t0), cached: o.res.CachedTokens, err: o.res.Err}
		}(i)
	}
	wg.Wait()
	return out, noise{lead: max(0, t0.Sub(heard)), late: dec.stepGap()}
}

// phase is a span of pull start times (since the freeze) and what pulls
// started in it must show. must holds for every pull: it follows from
// deadlines, which a loaded machine can delay but never advance. most holds
// for at least 80% of them: it has an upper bound a starved process can
// miss. A phase ends at a deadline of the decoder's that may come lead
// early, and one after the first begins at one that may come late after
// it is due: pulls sent in those margins may meet either phase and are not
// judged.
type phase struct {
	name       string
	from, to   time.Duration
	must, most func(s pullSample, n noise) string
}

func TestStallPendingHandshake(t *testing.T) {
	// vLLM's own timeouts and the seed's 30 s stall, on the fake clock of a
	// synctest bubble (virtual): the run takes the CPU time of its steps,
	// and the only noise left is the step itself (measured: late is one
	// tick, lead how long before the freeze the source last spoke).
	const (
		stall    = 30 * time.Second
		interval = 500 * time.Millisecond
		// A resumed source answers the reconnect's handshake, a lookup and
		// a fetch: a step on each side for each, 8 steps of 2 ms; the
		// handshake is symmetric (the decoder acks the source's own
		// connect) and the source's replies go out on a DEALER it opens
		// on the connect (vLLM's control/zmq.py): 4 steps more.
		slack = 24 * time.Millisecond
		edge  = 10 * time.Millisecond // pulls this close to a phase change are not judged
	)
	mutate := func(c *Config) {
		c.LookupTimeout = 8 * time.Second
		c.HandshakeTimeout = 30 * time.Second
		c.FreezeGap = 500 * time.Millisecond
		c.HeartbeatInterval, c.HeartbeatTimeout = 2*time.Second, 10*time.Second
		c.LookupHold, c.LoadTimeout, c.AbortAckTimeout = 5*time.Second, 30*time.Second, 10*time.Second
	}
	cfg := testConfig()
	mutate(&cfg)
	L, H := cfg.LookupTimeout, cfg.HandshakeTimeout
	// reapedIn: the pull ends on a deadline that follows the lookup
	// timeout, which counts from the decoder's last frame from the source.
	reapedIn := func(lo, hi time.Duration) func(s pullSample, n noise) string {
		return func(s pullSample, n noise) string {
			if s.end < lo-n.lead || s.end > hi+n.late {
				return fmt.Sprintf("want it to end in [%v, %v]", lo-n.lead, hi+n.late)
			}
			return ""
		}
	}
	notBefore := func(lo time.Duration) func(s pullSample, n noise) string {
		return func(s pullSample, n noise) string {
			if s.end < lo-n.lead {
				return fmt.Sprintf("ended before %v (%v less the %v since the decoder last heard the source), when no deadline had fired", lo-n.lead, lo, n.lead)
			}
			if s.cached != 0 {
				return "hit a frozen source"
			}
			return ""
		}
	}
	fast := func(s pullSample, n noise) string {
		if d := s.end - s.start; d > L/2+n.late {
			return fmt.Sprintf("took %v, want under %v (a local prefill)", d, L/2+n.late)
		}
		return ""
	}
	hit := func(s pullSample, _ noise) string {
		if s.cached == 0 {
			return "want a hit once the next handshake succeeded"
		}
		return ""
	}
	none := func(pullSample, noise) string { return "" }
	// After the stale handshake's deadline: the pulls of a whole handshake
	// timeout, so a late decoder still leaves enough to judge.
	horizon := L + 2*H
	inFlight := phase{"in flight at the freeze: reaped on the lookup timeout", 0, L - edge, notBefore(L), reapedIn(L, L+slack)}
	noGap := []phase{
		inFlight,
		// The resume is a timer from the freeze itself.
		{"meeting the reconnect", L + edge, stall - edge, func(s pullSample, _ noise) string {
			if s.end < stall {
				return fmt.Sprintf("ended before the resume at %v", stall)
			}
			return ""
		}, func(s pullSample, n noise) string {
			if s.end < stall || s.end > stall+slack+n.late {
				return fmt.Sprintf("want it to end in [%v, %v]", stall, stall+slack+n.late)
			}
			return hit(s, n)
		}},
		{"after the resume", stall + edge, horizon, none, hit},
	}
	tests := []struct {
		name       string
		mode       PendingMode
		staleRoute bool
		phases     []phase
		holdLoss   bool // the source's loop learns of its DEALER's loss late
	}{
		{"wait: in-flight pulls end on the lookup timeout, later ones on the dropped handshake", PendingWait, true, []phase{
			inFlight,
			// The reconnect's connect, sent while frozen, is dropped into
			// the stale route at resume: it runs to its deadline.
			{"meeting the reconnect", L + edge, L + H - edge, notBefore(L + H), reapedIn(L+H, L+H+slack)},
			{"after the reconnect's deadline", L + H + edge, horizon, none, hit},
		}, false},
		{"prefill: pulls meeting the pending handshake prefill at once", PendingPrefill, true, []phase{
			inFlight,
			{"meeting the reconnect", L + edge, L + H - edge, none, fast},
			// The first pull after the deadline may be the one that opens
			// the next session, which the fix misses at once: the phase
			// starts a pull later.
			{"after the reconnect's deadline", L + H + interval + edge, horizon, none, hit},
		}, false},
		{"wait without the stale-route gap: the reconnect succeeds at resume", PendingWait, false, noGap, false},
		{"wait without the stale-route gap, the old connection's loss met late: the reconnect still succeeds at resume", PendingWait, false, noGap, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				src := startEngine(t, func(c *Config) {
					mutate(c)
					c.StaleRoute = tt.staleRoute
					if tt.holdLoss {
						// After the resume, the reconnect's connect reaches
						// the loop before the old connection's loss does.
						c.holdLoss = func() { time.Sleep(20 * time.Millisecond) }
					}
				})
				dec := startEngine(t, func(c *Config) { mutate(c); c.PendingHandshake = tt.mode })
				samples, nz := stallRun(t, src, dec, stall, interval, horizon)
				t.Logf("the decoder last heard the source at most %v before the freeze; it waited up to %v between steps", nz.lead, nz.late)
				var tooBusy []string
				for _, ph := range tt.phases {
					from, to := ph.from, ph.to-nz.lead
					if from > 0 {
						from += nz.late
					}
					n, good := 0, 0
					for _, s := range samples {
						if s.start < from || s.start >= to {
							continue
						}
						n++
						if s.err != nil {
							t.Errorf("%s: pull at %v failed: %v", ph.name, s.start, s.err)
							continue
						}
						if msg := ph.must(s, nz); msg != "" {
							t.Errorf("%s: pull at %v ended at %v (cached %d): %s", ph.name, s.start, s.end, s.cached, msg)
						}
						if msg := ph.most(s, nz); msg == "" {
							good++
						} else {
							t.Logf("%s: pull at %v ended at %v (cached %d): %s", ph.name, s.start, s.end, s.cached, msg)
						}
					}
					if n < 5 {
						// The pulls go out every interval whatever the engines
						// do: fewer than five in a phase is this machine's
						// starving of the test (or of the decoder, which moved
						// the phase), not the engine's doing.
						tooBusy = append(tooBusy, fmt.Sprintf("%s: %d pulls sent in [%v, %v)", ph.name, n, from, to))
						continue
					}
					// On the fake clock no process is starved: every pull, not
					// most, meets the upper bound too.
					if good < n {
						t.Errorf("%s (pulls sent in [%v, %v)): %d of %d pulls as expected, want all", ph.name, from, to, good, n)
					}
				}
				if t.Failed() {
					t.Logf("decoder log:\n%s\nsource log:\n%s", dec.log, src.log)
				}
				srcLog, decLog := src.log.String(), dec.log.String()
				if !strings.Contains(srcLog, "engine resumed after 30.0s frozen") {
					t.Errorf("source log lacks the resume line:\n%s", srcLog)
				}
				if want := "lookup on " + src.ID() + " timed out after 8.0s"; !strings.Contains(decLog, want) {
					t.Errorf("decoder log lacks %q", want)
				}
				stale := "connect from " + dec.ID() + " routed to a stale connection and dropped"
				if strings.Contains(srcLog, stale) != tt.staleRoute {
					t.Errorf("source log has %q: %v, want %v", stale, !tt.staleRoute, tt.staleRoute)
				}
				if want := "P2PSession " + src.ID() + ": handshake timed out after 30.0s"; strings.Contains(decLog, want) != tt.staleRoute {
					t.Errorf("decoder log has %q: %v, want %v", want, !tt.staleRoute, tt.staleRoute)
				}
				if len(tooBusy) > 0 && !t.Failed() {
					// What was judged held; what could not be is said, not failed.
					t.Skipf("the machine was too busy to judge every phase (the decoder waited up to %v between steps): %s", nz.late, strings.Join(tooBusy, "; "))
				}
			})
		})
	}
}

// warm pulls until one hits, so the session is handshaken (in prefill mode
// the first pull only starts the handshake), as the experiment's warm-up
// does.
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
