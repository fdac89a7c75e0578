package experiment_test

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/console"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
)

// TestP2pfaultsOwnLagIsNotJudgedAgainstAHealthySource: the seed's stall of
// source-0 (30 s at 10 s) on the virtual cluster's fixed arm, during which p2pfault falls behind
// (an injected lag: it is held 6 s before it sends one of source-1's
// trials, which also reads its answer that late, and the trials behind it
// go late). The healthy source's pull then takes over the 5 s bound:
// without the lag rule check 4 would fail source-1. The window is not
// judged, saying how much p2pfault lagged on how many trials, the failed
// check says so too, and the run exits 3. The same run without the lag
// passes (exit 0); on the main arm, whose faulted source's pulls hang
// with no lag about them, the lag hides nothing: it fails (exit 1).
func TestP2pfaultsOwnLagIsNotJudgedAgainstAHealthySource(t *testing.T) {
	cfg := experiment.Config{Arm: "fixed", Case: fault.ActionStall, FaultAt: seedFaultAt}
	main, fixed := sliceEngines("main"), sliceEngines("fixed")
	hold := func(i int, k int64) time.Duration {
		if i == 1 && k == 26 { // source-1's trial of slot 13.25s, in the stall's window
			return 6 * time.Second
		}
		return 0
	}
	synctest.Test(t, func(t *testing.T) {
		r := runVirtual(t, cfg, fixed)
		if r.err != nil || check.Outcome(r.verdict) != nil || len(r.verdict.NotJudged) > 0 {
			t.Fatalf("without lag: %v, verdict passed %v, not judged %q: want a pass\n%+v", r.err, r.verdict.Passed, r.verdict.NotJudged, r.verdict.Checks)
		}
		for _, ev := range r.events {
			for _, s := range ev.Samples {
				if s.Late > 0 {
					t.Errorf("without lag a trial was sent late: %+v", s)
				}
			}
		}
	})
	held := cfg
	held.ProbeHold = hold
	synctest.Test(t, func(t *testing.T) {
		r := runVirtual(t, held, main)
		if r.err != nil || exitcode.Code(check.Outcome(r.verdict)) != exitcode.Failed {
			t.Errorf("main arm with lag: %v, outcome %v: want a failed bound (exit 1)", r.err, check.Outcome(r.verdict))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		r := runVirtual(t, held, fixed)
		if out := check.Outcome(r.verdict); r.err != nil || exitcode.Code(out) != exitcode.NotJudged {
			t.Fatalf("run: %v, outcome %v (exit %d), want not judged (exit 3)", r.err, out, exitcode.Code(out))
		}
		late, slow := 0, 0
		for _, ev := range r.events {
			for _, s := range ev.Samples {
				if s.Late > 0 {
					late++
				}
				if s.Source == 1 && s.Latency > 5*time.Second {
					slow++
				}
			}
		}
		if late < 2 || slow != 1 {
			t.Errorf("%d trials sent late, %d of source-1's pulls over 5s: want the held one and those behind it late, one over the bound", late, slow)
		}
		v := r.verdict
		if len(v.NotJudged) != 1 || !strings.Contains(v.NotJudged[0], "p2pfault lagged 6000 ms on ") || v.Failed() {
			t.Fatalf("verdict not judged %q, failed %v: want the window not judged for p2pfault's lag, nothing failed", v.NotJudged, v.Failed())
		}
		var healthy *event.Result
		for _, w := range v.Windows {
			for i, c := range w.Checks {
				if c.Name == check.NameHealthy {
					healthy = &w.Checks[i]
				}
			}
		}
		if healthy == nil || healthy.Passed || !strings.HasPrefix(healthy.Detail, "not judged: p2pfault lagged 6000 ms on ") {
			t.Errorf("the window's %s: %+v, want it not judged for the lag", check.NameHealthy, healthy)
		}
		// What a headless run prints of it (go test -v shows it).
		var out bytes.Buffer
		p := console.New(&out, "")
		for _, ev := range r.events {
			p.Print(ev)
		}
		var lines []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "behind") || strings.Contains(l, "not judged") || strings.Contains(l, "fault:") {
				lines = append(lines, l)
			}
		}
		t.Logf("headless lines:\n%s", strings.Join(lines, "\n"))
	})
}
