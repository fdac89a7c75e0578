package experiment_test

import (
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/cause"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/runner"
)

// TestWireCausesAgreeWithTheLines: on the virtual cluster with a link,
// every control message through it is a wire event, and the causes the
// wire alone gives (cause.FromWire: no engine line) agree with the run's,
// read from the sim's lines, pull by pull: under mute (the half-open
// peer: lookups unanswered until the sim's lookup deadline) and hold-ack
// (connect_ack withheld until the handshake deadline), the pulls the
// lines name by a mechanism are named alike from the wire, none unknown.
// The run's causes of those pulls come from the lines (they carry the
// timer a line names; the wire names none). The shares are logged:
// docs/link.md quotes them.
func TestWireCausesAgreeWithTheLines(t *testing.T) {
	for _, tc := range []struct {
		timeline string
		want     event.Cause
	}{
		{"at 10s mute source-0 for 20s", event.CauseLookupDeadline},
		{"at 10s hold-ack source-0 for 35s", event.CauseHandshake},
	} {
		t.Run(tc.timeline, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				evs, _ := mustRunVirtual(t, experiment.Config{Timeline: tc.timeline, Duration: 50 * time.Second, Link: true}, runner.Config{})
				var lines []event.Sample
				withheld := 0
				for _, ev := range evs {
					switch ev.Kind {
					case event.KindSamples:
						lines = append(lines, ev.Samples...)
					case event.KindWire:
						if ev.Wire.Withheld() {
							withheld++
						}
					}
				}
				if withheld == 0 {
					t.Fatal("no wire event says a message was withheld")
				}
				wire := cause.FromWire(evs)
				if len(wire) != len(lines) {
					t.Fatalf("%d pulls from the wire, %d in the run", len(wire), len(lines))
				}
				g := cause.Agree(lines, wire)
				t.Logf("%s: wire agrees with the lines on %d of %d pulls, on %d of %d slow pulls; %d named by the wire alone; disagree %v",
					tc.timeline, g.Agree, g.Pulls, g.SlowAgree, g.Slow, g.ByWire, g.Disagree)
				named := 0
				for i, s := range lines {
					if s.Cause == tc.want && !s.ByWire {
						// The lines named it (with the timer a line names;
						// the wire names none): the wire is compared.
						if s.Timer == nil {
							t.Errorf("trial %d: %s named by a line with no timer", s.Trial, s.Cause)
						}
						named++
						if wire[i].Cause != tc.want {
							t.Errorf("trial %d (%.1f s, took %v): the lines say %s, the wire %s", s.Trial, s.Start.Seconds(), s.Latency, s.Cause, wire[i].Cause)
						}
					}
				}
				if named < 10 {
					t.Errorf("%d pulls ended by %s, want ≥ 10", named, tc.want)
				}
				if 100*g.Agree < 95*g.Pulls {
					t.Errorf("the wire agrees on %d of %d pulls, want ≥ 95%%", g.Agree, g.Pulls)
				}
			})
		})
	}
}
