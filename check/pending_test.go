package check

import (
	"testing"
	"time"

	"p2pfault/event"
)

// stallLive is main's stall seen live at now: every pull naming source-0
// since the fault at 10 s was sent and none has ended; source-1's all hit
// in 10 ms. One pull a source every 0.5 s.
func stallLive(now time.Duration) Input {
	var samples []event.Sample
	var pending []event.PullStart
	trial := int64(0)
	for t := time.Duration(0); t < now; t += 500 * ms {
		for src := range 2 {
			trial++
			switch {
			case src == 0 && t >= 10*time.Second:
				pending = append(pending, event.PullStart{Source: 0, Trial: trial, Start: t})
			case t+10*ms <= now:
				s := pull(src, t, 10*ms)
				s.Trial = trial
				samples = append(samples, s)
			}
		}
	}
	w := seedWindow()
	w.End = now // still open
	return Input{Samples: samples, Pending: pending, Now: now, Window: w, RunEnd: now, Bounds: DefaultBounds()}
}

// Pulls in flight past a bound fail its check at once, before any of them
// returned, and say how many and how old.
func TestPendingPullsPastTheBoundFailAtOnce(t *testing.T) {
	v := Evaluate(stallLive(39 * time.Second))
	r := result(t, v, NameFaultedBound)
	const want = "28 requests naming the faulted source are in flight past 15.0s (oldest 29.0s)"
	if r.Passed || r.Empty || r.Detail != want || r.Pending != 58 {
		t.Errorf("faulted_max = %+v; want failed with %q, 58 pending counted", r, want)
	}
	med := result(t, v, NameFaultedMedian)
	if med.Passed || med.Empty || med.Pending != 54 {
		t.Errorf("faulted_median_after_detect = %+v; want failed, the 54 pulls from 12 s on counted at their age", med)
	}
	if want := "54 requests naming the faulted source from 12.0s on took at least 13.75s at the median, 54 of them in flight counted at their age so far (bound 2.0s)"; med.Detail != want {
		t.Errorf("median detail %q, want %q", med.Detail, want)
	}
	if all := result(t, v, NameAll200); !all.Passed || all.Pending != 58 {
		t.Errorf("all_200 = %+v; want passed (they may still return 200), 58 in flight said", all)
	}
	if v.Passed {
		t.Error("the verdict passed with pulls in flight past the bound")
	}
	if tm := FaultTimes(stallLive(39 * time.Second)); tm.DetectS != nil {
		t.Errorf("detect_s = %v with every pull hanging, want null", *tm.DetectS)
	}

	// 14 s into the stall none has waited 15 s yet: faulted_max has not
	// failed (it is empty: nothing ended), the median has.
	v = Evaluate(stallLive(24 * time.Second))
	if r := result(t, v, NameFaultedBound); r.Passed || !r.Empty || r.Detail != "none ended yet: 28 pulls naming the faulted source started in [10.0s, 24.0s) are in flight, oldest 14.0s" {
		t.Errorf("faulted_max at 24 s = %+v; want empty with 28 in flight said", r)
	}
	// Just past 15 s the oldest has broken it.
	v = Evaluate(stallLive(25*time.Second + ms))
	if r := result(t, v, NameFaultedBound); r.Passed || r.Empty || r.Detail != "1 request naming the faulted source is in flight past 15.0s (oldest 15.0s)" {
		t.Errorf("faulted_max at 25.001 s = %+v; want failed by the first pull", r)
	}
}

// Pulls in flight not past any bound break nothing; the checks say them.
func TestYoungPendingPullsBreakNothing(t *testing.T) {
	in := Input{Samples: healthyRun(), Window: seedWindow(), RunEnd: seedRunEnd, Now: 39 * time.Second, Bounds: DefaultBounds(),
		Pending: []event.PullStart{{Source: 0, Trial: 1000, Start: 38500 * ms}, {Source: 1, Trial: 1001, Start: 38 * time.Second}}}
	v := Evaluate(in)
	if !v.Passed {
		t.Fatalf("verdict failed with two pulls in flight for under a second: %+v", v.Checks)
	}
	if r := result(t, v, NameFaultedBound); r.Pending != 1 || r.Detail != "30 requests naming the faulted source each ended within 15.0s (max 0.01s); 1 in flight, oldest 0.5s" {
		t.Errorf("faulted_max = %+v", r)
	}
	if r := result(t, v, NameHealthy); r.Pending != 1 || r.Detail != "pulls naming a healthy source hit 30 of 30 (bound 90%), max 0.01s (bound 5.0s); 1 in flight, oldest 1.0s" {
		t.Errorf("healthy_keeps_hitting = %+v", r)
	}
}

func TestPendingHealthyPulls(t *testing.T) {
	base := Input{Samples: healthyRun(), Window: seedWindow(), RunEnd: seedRunEnd, Now: 39 * time.Second, Bounds: DefaultBounds()}

	in := base
	in.Pending = []event.PullStart{{Source: 1, Trial: 1000, Start: 30 * time.Second}}
	r := result(t, Evaluate(in), NameHealthy)
	if r.Passed || r.Detail != "1 request naming a healthy source is in flight past 5.0s (oldest 9.0s)" {
		t.Errorf("a healthy pull 9 s in flight: %+v; want failed on the 5 s bound", r)
	}

	// The rate fails only when no outcome of the pulls in flight could
	// lift it: 26 of 30 hit (87 %) with 1 young pull in flight could reach
	// 27 of 31 (87 %): failed; with 10 in flight, 36 of 40 (90 %): not yet.
	samples := healthyWindow(30, 26, 10*ms)
	in = Input{Samples: samples, Window: seedWindow(), RunEnd: seedRunEnd, Now: 39 * time.Second, Bounds: DefaultBounds()}
	young := func(n int) []event.PullStart {
		var p []event.PullStart
		for i := range n {
			p = append(p, event.PullStart{Source: 1, Trial: int64(2000 + i), Start: 38*time.Second + time.Duration(i)*10*ms})
		}
		return p
	}
	in.Pending = young(1)
	if r := result(t, Evaluate(in), NameHealthy); r.Passed || r.Detail != "pulls naming a healthy source hit 26 of 30 (87%, bound 90%) and the 1 in flight cannot lift them to it" {
		t.Errorf("1 in flight: %+v", r)
	}
	in.Pending = young(10)
	if r := result(t, Evaluate(in), NameHealthy); !r.Passed {
		t.Errorf("10 in flight could still lift the rate to 90%%: %+v", r)
	}
}

func TestPendingRecoveryPulls(t *testing.T) {
	in := Input{Samples: recoveryRun(10, 4), Window: seedWindow(), RunEnd: seedRunEnd, Now: 50 * time.Second, Bounds: DefaultBounds()}
	in.Pending = []event.PullStart{{Source: 0, Trial: 5000, Start: 49 * time.Second}, {Source: 0, Trial: 5001, Start: 49500 * ms}}
	if r := result(t, Evaluate(in), NameRecovery); !r.Passed || r.Pending != 2 {
		t.Errorf("4 of 10 hit with 2 in flight could reach 6 of 12 (50%%): %+v; want not failed yet", r)
	}
	in.Samples = recoveryRun(10, 3)
	if r := result(t, Evaluate(in), NameRecovery); r.Passed || r.Detail != "after the fault window, 3 of 10 pulls naming the faulted source hit (30%, bound 50%) and the 2 in flight cannot lift them to it" {
		t.Errorf("3 of 10 with 2 in flight (at most 5 of 12): %+v; want failed", r)
	}
}

// The same pulls cut short by the run's end (the experiment's end after q
// or SIGTERM: Aborted samples aged by their latency) and told as pull
// starts without their sample (a stream read by `p2pfault report`, aged at
// its last timestamp) get the same verdict.
func TestCutShortAndPendingJudgeAlike(t *testing.T) {
	live := stallLive(39 * time.Second)
	cut := live
	cut.Samples = append([]event.Sample(nil), live.Samples...)
	for _, p := range live.Pending {
		cut.Samples = append(cut.Samples, event.Sample{Source: p.Source, Trial: p.Trial, Start: p.Start, Latency: live.Now - p.Start, Aborted: true, Err: "probe aborted"})
	}
	cut.Pending, cut.Now = nil, 0
	a, b := Evaluate(live), Evaluate(cut)
	for i := range a.Checks {
		if a.Checks[i] != b.Checks[i] {
			t.Errorf("check %s: pending %+v, cut short %+v", a.Checks[i].Name, a.Checks[i], b.Checks[i])
		}
	}
}

func TestCrossed(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second} // open
	b := DefaultBounds()
	p := []event.PullStart{{Source: 0, Trial: 1, Start: 12 * time.Second}}
	tests := []struct {
		name     string
		pending  []event.PullStart
		from, to time.Duration
		want     bool
	}{
		{"before the median bound", p, 13 * time.Second, 14 * time.Second, false},
		{"crosses the median bound (2 s)", p, 13900 * ms, 14100 * ms, true},
		{"between the bounds", p, 15 * time.Second, 26 * time.Second, false},
		{"crosses faulted_max (15 s)", p, 26900 * ms, 27100 * ms, true},
		{"a healthy pull crosses healthy_max (5 s)", []event.PullStart{{Source: 1, Trial: 2, Start: 12 * time.Second}}, 16900 * ms, 17100 * ms, true},
		{"a pull before the window crosses nothing the checks judge", []event.PullStart{{Source: 0, Trial: 3, Start: 9 * time.Second}}, 10 * time.Second, 30 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Crossed(tt.pending, w, b, tt.from, tt.to); got != tt.want {
				t.Errorf("Crossed(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.want)
			}
		})
	}
}
