package experiment_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

func resultOf(v *event.Verdict, name string) (event.Result, bool) {
	for _, r := range v.Checks {
		if r.Name == name {
			return r, true
		}
	}
	return event.Result{}, false
}

// TestPullsInFlightFailTheVerdictBeforeTheyReturn: main's stall on the
// virtual cluster at the seed's time, in a synctest bubble. From the
// lookup timeout on (8 s into the stall) each new pull naming source-0
// waits on a reconnect's handshake (30 s), so they hang past the 15 s
// faulted_max bound long before any returns. The live verdict fails
// faulted_max within one flush (100 ms) of the instant the first pull in
// flight waited past it, counting them (the dashboard shows it), while no
// pull naming source-0 has yet ended past the bound; ended then by the
// context (q, Ctrl-C), the run's final verdict judges the same pulls, cut
// short, as pending past the bound.
func TestPullsInFlightFailTheVerdictBeforeTheyReturn(t *testing.T) {
	synctest.Test(t, testPullsInFlightFailTheVerdictBeforeTheyReturn)
}

func testPullsInFlightFailTheVerdictBeforeTheyReturn(t *testing.T) {
	exp, err := experiment.New(experiment.Config{
		Case: "stall",
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{
			ExtraArgs: []string{"--sim-startup-delay=0s"},
		}},
		OutDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	bound := exp.Info().Bounds.FaultedMax
	rec := &recorder{ch: exp.Subscribe()}
	tm := bubbleDashboard(t, exp, 140, 45)
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	done := make(chan struct{})
	go func() { defer close(done); _, runErr = exp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	})

	win := rec.waitFor(t, "the stall's window", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindWindow && ev.Window.End == 0
	}).Window
	live := rec.waitFor(t, "a live verdict failing faulted_max by pulls in flight", 30*time.Second, func(ev event.Event) bool {
		if ev.Kind != event.KindVerdict || ev.Final {
			return false
		}
		r, ok := resultOf(ev.Verdict, check.NameFaultedBound)
		return ok && !r.Passed && r.Pending > 0 && strings.Contains(r.Detail, "in flight past")
	})
	for _, ev := range rec.seen {
		for _, s := range ev.Samples {
			if s.Source == win.Source && s.Start >= win.Start && s.Latency > bound {
				t.Fatalf("a pull naming source-0 had ended past the bound (%s) before the verdict at %s failed: it was not the pulls in flight that failed it", s.Latency, live.T)
			}
		}
	}
	// The first instant a pull naming source-0, started in the window
	// and not ended by then, had waited the bound.
	endedTrial := map[int64]bool{}
	for _, ev := range rec.seen {
		for _, s := range ev.Samples {
			endedTrial[s.Trial] = true
		}
	}
	var crossAt time.Duration = -1
	for _, ev := range rec.seen {
		for _, p := range ev.Pulls {
			if p.Source == win.Source && p.Start >= win.Start && !endedTrial[p.Trial] && p.Start+bound <= live.T {
				if crossAt < 0 || p.Start+bound < crossAt {
					crossAt = p.Start + bound
				}
			}
		}
	}
	if crossAt < 0 || live.T < crossAt || live.T > crossAt+100*time.Millisecond {
		t.Errorf("the live verdict failed at %v; the first pull in flight crossed the bound at %v: want it within one 100 ms flush", live.T, crossAt)
	}
	r, _ := resultOf(live.Verdict, check.NameFaultedBound)
	t.Logf("live at %.2fs (crossed at %.2fs): %s", live.T.Seconds(), crossAt.Seconds(), r.Detail)
	if live.Verdict.Passed {
		t.Error("the live verdict passed with faulted_max failed")
	}
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("✗ faulted_max")) && bytes.Contains(b, []byte("in flight past"))
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))

	cancel()
	final := rec.waitFor(t, "the final verdict", 30*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindVerdict && ev.Final
	})
	fr, _ := resultOf(final.Verdict, check.NameFaultedBound)
	// One or more past the bound: how many depends on how soon after the
	// first crossed it the cancel came (a pull is sent every 0.5 s).
	// The cancel cuts them short; one whose cut answer the probe recorded
	// before the final verdict counts as a pull that took its age.
	inFlight := fr.Pending > 0 && strings.Contains(fr.Detail, "in flight past")
	ended := strings.Contains(fr.Detail, "a request naming the faulted source took")
	if fr.Passed || !(inFlight || ended) {
		t.Errorf("final faulted_max = %+v; want failed by the pulls cut short past the bound", fr)
	}
	if final.Verdict.Passed {
		t.Error("the final verdict of an interrupted main stall passed")
	}
	<-done
	if !errors.Is(runErr, exitcode.ErrInterrupted) {
		t.Errorf("run error %v, want interrupted", runErr)
	}
}
