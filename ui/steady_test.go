package ui

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/check"
	"p2pfault/event"
)

// sceneSoakEnded is a run without a fault (case none) at its end: its
// final verdict has no check to show but each source's steady-state
// summary (the judge's, over its pulls).
func sceneSoakEnded() scene {
	var s script
	s.run(runInfo("none", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, 60*time.Second, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		l, _ := healthy(i, start, trial)
		return l, trial%40 != 0 // a miss now and then
	})
	var samples []event.Sample
	for _, ev := range s.events {
		samples = append(samples, ev.Samples...)
	}
	judged, _ := check.JudgeRun(check.RunFacts{Setup: check.Setup{Bounds: check.DefaultBounds(), Sources: 2},
		Samples: samples, Now: 60 * time.Second, RunEnd: 60 * time.Second})
	v := event.Verdict{Passed: true, Steady: judged.Steady}
	s.add(60*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseDone})
	s.verdict(60*time.Second, v, true)
	s.add(60*time.Second, event.Event{Kind: event.KindEnd, Message: "run complete"})
	return scene{events: s.events, now: 60 * time.Second, ctrl: newFakeCtrl()}
}

func TestSteadyViewsMatchGolden(t *testing.T) {
	for _, size := range []struct{ w, h int }{{80, 24}, {160, 48}} {
		t.Run("soak_ended_"+strconv.Itoa(size.w)+"x"+strconv.Itoa(size.h), func(t *testing.T) {
			out := feed(t, sceneSoakEnded(), size.w, size.h).View()
			assertFits(t, out, size.w, size.h)
			golden.RequireEqual(t, []byte(out))
		})
	}
}

// A soak's verdict shows each source's figures and none of the fault
// figures it has not got.
func TestSoakVerdictShowsTheSteadyState(t *testing.T) {
	out := feed(t, sceneSoakEnded(), 160, 48).View()
	for _, want := range []string{"verdict PASS", "steady   every pull of the run", "SOURCE    PULLS  200S  ERRORS  HIT   P50     P90     P99     MAX     IN FLIGHT", "source-0  120    120   0       100%  22.0ms  32.0ms  34.0ms  34.0ms  0", "source-1  120    120   0       95%   22.0ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("the view lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"faulted  n", "recovery n", "times"} {
		if strings.Contains(out, absent) {
			t.Errorf("a run without a fault shows %q:\n%s", absent, out)
		}
	}
}
