package exporter

import (
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
)

// A window the final verdict left open and unbroken is counted when the
// end event says how the run ended: interrupted when it was cut short,
// as judged when it ran its course; one with a bound broken is failed
// either way.
func TestAWindowOfARunCutShortIsCountedInterrupted(t *testing.T) {
	open := event.Result{Name: check.NameRecovery, Empty: true, Detail: "empty window"}
	broken := event.Result{Name: check.NameFaultedBound, Detail: "1 request naming the faulted source is in flight past 15.0s", Pending: 1}
	held := event.Result{Name: check.NameAll200, Passed: true}
	cases := []struct {
		name   string
		checks []event.Result
		code   int
		want   string
	}{
		{"cut short, nothing broken", []event.Result{held, open}, exitcode.Interrupted, ResultInterrupted},
		{"cut short by an error, nothing broken", []event.Result{held, open}, exitcode.Usage, ResultInterrupted},
		{"cut short past a bound", []event.Result{held, broken, open}, exitcode.Interrupted, ResultFailed},
		{"ran its course", []event.Result{held, open}, exitcode.Failed, ResultFailed},
		{"ran its course and passed", []event.Result{held}, exitcode.OK, ResultPassed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wall0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
			x := newAt(func() time.Time { return wall0 })
			s := x.Stream()
			feed := func(at time.Duration, ev event.Event) {
				ev.T, ev.Wall, ev.Arm = at, wall0.Add(at), "main"
				s.Feed(ev)
			}
			info := event.RunInfo{Arm: "main", Case: "stall", Mode: event.ModeP2P, Engine: "sim", TimeScale: 1, Sources: 2,
				Interval: 500 * time.Millisecond, Duration: time.Minute}
			feed(0, event.Event{Kind: event.KindRun, Run: &info})
			w := event.Window{Source: 0, Start: 10 * time.Second, Recovers: true, Kind: "stall"}
			feed(w.Start, event.Event{Kind: event.KindWindow, Window: &w})
			w.End = 12 * time.Second
			feed(w.End, event.Event{Kind: event.KindWindow, Window: &w})
			v := event.Verdict{Checks: tc.checks, Passed: tc.want == ResultPassed}
			feed(w.End, event.Event{Kind: event.KindVerdict, Verdict: &v, Final: true})
			feed(w.End, event.Event{Kind: event.KindEnd, ExitCode: tc.code})
			for _, res := range []string{ResultPassed, ResultFailed, ResultInterrupted} {
				n := 0.0
				if res == tc.want {
					n = 1
				}
				labels := map[string]string{"arm": "main", "mode": "p2p", "case": "stall", "kind": "stall", "result": res}
				if n == 0 && res == ResultInterrupted {
					absent(t, x, "p2pfault_windows_judged_total", labels)
					continue
				}
				want(t, x, "p2pfault_windows_judged_total", labels, n)
			}
		})
	}
}
