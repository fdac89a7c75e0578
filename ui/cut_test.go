package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
)

// The verdict a run cut short leaves reads INTERRUPTED, unless a bound
// had broken (FAIL); a run that ran its course, and one without a planned
// end that was quit, keep their verdict's word.
func TestTheVerdictOfARunCutShortReadsInterrupted(t *testing.T) {
	open := event.Result{Name: check.NameRecovery, Empty: true, Detail: "empty window: no pull naming the faulted source started in [12.0s, 12.0s)"}
	broken := event.Result{Name: check.NameFaultedBound, Detail: "1 request naming the faulted source is in flight past 15.0s (oldest 16.0s)", Pending: 1}
	held := event.Result{Name: check.NameAll200, Passed: true, Detail: "all 20 decoder requests returned 200"}
	end := func(code int) *event.Event {
		return &event.Event{Kind: event.KindEnd, ExitCode: code, Message: "interrupted"}
	}
	cases := []struct {
		name     string
		duration time.Duration // the run's planned duration, 0: until quit
		checks   []event.Result
		end      *event.Event // nil: the stream closed without one
		want     string
	}{
		{"interrupted, nothing broken", time.Minute, []event.Result{held, open}, end(exitcode.Interrupted), "INTERRUPTED"},
		{"interrupted, every check held", time.Minute, []event.Result{held}, end(exitcode.Interrupted), "INTERRUPTED"},
		{"crashed, nothing broken", time.Minute, []event.Result{held, open}, nil, "INTERRUPTED"},
		{"interrupted past a bound", time.Minute, []event.Result{held, broken, open}, end(exitcode.Interrupted), "FAIL"},
		{"ran its course", time.Minute, []event.Result{held, open}, end(exitcode.Failed), "FAIL"},
		{"until quit, quit", 0, []event.Result{held}, end(exitcode.Interrupted), "PASS"},
	}
	styles := NewStyles(asciiRenderer())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newState(100, 100)
			st.apply(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "stall", Sources: 2, Duration: tc.duration}}, 0)
			passed := true
			for _, c := range tc.checks {
				passed = passed && c.Passed
			}
			v := event.Verdict{Checks: tc.checks, Passed: passed}
			st.apply(event.Event{T: 12 * time.Second, Kind: event.KindVerdict, Verdict: &v, Final: true}, 0)
			if tc.end != nil {
				ev := *tc.end
				ev.T = 12 * time.Second
				st.apply(ev, 0)
			} else {
				st.closeStream(time.Now())
			}
			got := verdictTable{verdict: st.verdict, run: st.run, styles: &styles, cut: st.cutShort()}.Render(100, 10)
			title, _, _ := strings.Cut(got, "\n")
			if !strings.Contains(title, "verdict "+tc.want) {
				t.Fatalf("verdict title %q, want %s", title, tc.want)
			}
		})
	}
}
