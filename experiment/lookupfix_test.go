package experiment_test

import (
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
)

// TestHalfOpenOnTodaysMainAndOnItsLookupFix is the half-open case (every
// lookup_resp of source-0 withheld by its link for the fault's length,
// heartbeats passing) on the arms that tell the lookup deadline apart, on
// the virtual cluster at a quarter of the time:
//   - today (vLLM main @099ef822, no lookup deadline): every pull sent to
//     source-0 in the window waits until the probe gives up, its pull
//     timeout (60 s, 15 s here), the bound broken by a pull that never
//     ended on its own;
//   - pr56836 (#56836's 30 s progress deadline): each ends within one
//     lookup deadline of its send (7.5 s here), by the session's reap, and
//     prefills locally; none reaches the pull timeout.
//
// On both, the pulls after the window hit again: the session (kept on
// today, a new one on pr56836) answers once the link lets it.
func TestHalfOpenOnTodaysMainAndOnItsLookupFix(t *testing.T) {
	const scale = 0.25
	pullTimeout := time.Duration(scale * float64(60*time.Second))
	deadline := time.Duration(scale * float64(30*time.Second))
	for _, tc := range []struct {
		arm    string
		cause  event.Cause
		lo, hi time.Duration // a window pull's latency
	}{
		{"today", event.CausePullTimeout, pullTimeout, pullTimeout + 100*time.Millisecond},
		{"pr56836", event.CauseLookupDeadline, 0, deadline + 500*time.Millisecond},
	} {
		t.Run(tc.arm, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				evs, v := mustRunVirtual(t, experiment.Config{Arm: tc.arm, Case: fault.CaseHalfOpen, TimeScale: scale, FaultAt: seedFaultAt},
					runner.Config{ExtraArgs: armArgs(tc.arm)})
				faultAt := time.Duration(scale * float64(seedFaultAt))
				end := faultAt + time.Duration(scale*float64(30*time.Second))
				var in, after, byCause, slowest int
				var maxIn time.Duration
				for _, ev := range evs {
					if ev.Kind != event.KindSamples {
						continue
					}
					for _, s := range ev.Samples {
						if s.Source != 0 || s.Peer == "" {
							continue
						}
						switch {
						// Sent in the window, not at its edges.
						case s.Start > faultAt+500*time.Millisecond && s.Start < end-500*time.Millisecond:
							in++
							maxIn = max(maxIn, s.Latency)
							if s.Cause == tc.cause {
								byCause++
							}
							if s.Latency >= tc.lo && s.Latency <= tc.hi {
								slowest++
							} else if tc.arm == "today" {
								t.Errorf("trial %d sent at %v took %v, want the pull timeout %v", s.Trial, s.Start, s.Latency, pullTimeout)
							}
							if s.Latency > tc.hi {
								t.Errorf("trial %d sent at %v took %v, want ≤ %v", s.Trial, s.Start, s.Latency, tc.hi)
							}
						case s.Start > end+time.Second && s.CachedTokens > 0:
							after++
						}
					}
				}
				t.Logf("%s: %d pulls sent in the window, %d ended by %s, max %v; %d hit after it", tc.arm, in, byCause, tc.cause, maxIn, after)
				if in < 20 || byCause != in {
					t.Errorf("%d of %d pulls in the window ended by %s, want all (≥ 20)", byCause, in, tc.cause)
				}
				if after < 10 {
					t.Errorf("%d pulls hit after the window, want ≥ 10", after)
				}
				var judged bool
				for _, c := range v.Checks {
					if c.Name == check.NameFaultedBound {
						judged = true
						if c.Passed {
							t.Errorf("%s passed (%s), want it failed by pulls of %v", c.Name, c.Detail, maxIn)
						}
					}
				}
				if !judged {
					t.Errorf("no %s among %+v", check.NameFaultedBound, v.Checks)
				}
			})
		})
	}
}
