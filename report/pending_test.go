package report

import (
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// hangingStall is main's stall cut off at `end` by a crash: every pull
// naming source-0 since the fault at 10 s was told by a pull_start event
// and none ended; source-1's hit. No final verdict, no end event.
func hangingStall(end time.Duration) []event.Event {
	info := mainStall().info()
	evs := []event.Event{
		{T: -5 * time.Second, Kind: event.KindRun, Run: &info},
		{T: 0, Kind: event.KindPhase, Phase: event.PhaseBaseline},
		{T: 10 * time.Second, Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 10 * time.Second, Recovers: true}},
	}
	trial := int64(0)
	for t := time.Duration(0); t < end; t += 500 * ms {
		trial += 2
		starts := []event.PullStart{{Source: 0, Trial: trial, Start: t}, {Source: 1, Trial: trial + 1, Start: t}}
		evs = append(evs, event.Event{T: t, Kind: event.KindPullStart, Pulls: starts})
		samples := []event.Sample{hit(1, t, 10*ms)}
		samples[0].Trial = trial + 1
		if t < 10*time.Second {
			s := hit(0, t, 10*ms)
			s.Trial = trial
			samples = append(samples, s)
		}
		evs = append(evs, event.Event{T: t + 10*ms, Kind: event.KindSamples, Samples: samples})
	}
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].Wall = wall0().Add(evs[i].T)
	}
	return evs
}

// A stream whose pulls started and never ended (a crash mid-stall) is
// judged with them pending until its last timestamp: faulted_max has
// failed by them, as the live verdict said, though none ever returned.
func TestRebuildJudgesPullsThatNeverEndedAsPending(t *testing.T) {
	r, err := FromEvents(hangingStall(39 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Recomputed || !r.Truncated {
		t.Fatalf("recomputed %v truncated %v, want both", r.Recomputed, r.Truncated)
	}
	var fm event.Result
	for _, c := range r.Verdict.Checks {
		if c.Name == check.NameFaultedBound {
			fm = c
		}
	}
	const want = "28 requests naming the faulted source are in flight past 15.0s (oldest 28.5s)"
	if fm.Passed || fm.Detail != want || fm.Pending != 58 {
		t.Errorf("faulted_max = %+v; want failed: %q, 58 pending", fm, want)
	}
	if r.Verdict.Passed {
		t.Error("the rebuilt verdict passed")
	}
	if tm := r.Row().Times; tm == nil || tm.DetectS != nil {
		t.Errorf("times %+v: want detect_s null (every pull in the window hung)", tm)
	}
	// The steady-state table counts source-0's hanging pulls nowhere: they
	// are in the fault window. Outside it every pull hit.
	row := r.Row()
	if len(row.Steady) != 2 || row.Steady[0].N != 20 || row.Steady[0].InFlight != 0 || row.Steady[1].N != 20 {
		t.Errorf("steady %+v; want 20 pulls per source before the fault", row.Steady)
	}
}

// A run stopped by SIGTERM or q mid-stall writes a final verdict over
// samples cut short (Aborted, aged by their latency); `p2pfault report`
// rebuilding the same events without that verdict reaches the same one.
func TestRebuildOfAnInterruptedStallGivesTheRunsVerdict(t *testing.T) {
	const end = 39 * time.Second
	evs := hangingStall(end)
	info := *evs[0].Run
	var samples []event.Sample
	var cut []event.Sample
	for _, ev := range evs {
		samples = append(samples, ev.Samples...)
		for _, p := range ev.Pulls {
			if p.Source == 0 && p.Start >= 10*time.Second {
				cut = append(cut, event.Sample{Source: 0, Trial: p.Trial, Start: p.Start, Latency: end - p.Start, Aborted: true, Err: "probe aborted"})
			}
		}
	}
	evs = append(evs, event.Event{T: end, Kind: event.KindSamples, Samples: cut, Seq: int64(len(evs) + 1), Wall: wall0().Add(end)})
	samples = append(samples, cut...)
	w := event.Window{Source: 0, Start: 10 * time.Second, End: end, Recovers: true}
	judged, _ := check.JudgeRun(check.RunFacts{Setup: check.Setup{Bounds: info.Bounds, Sources: info.Sources, Scripted: true},
		Windows: []event.Window{w}, Samples: samples, Now: end, RunEnd: end})
	// The final verdict as the experiment's judge gave it before verdicts
	// carried windows and the steady state.
	final := event.Verdict{Passed: judged.Passed, Checks: judged.Checks, Summary: judged.Summary, Times: judged.Times}
	evs = append(evs,
		event.Event{T: end, Kind: event.KindPhase, Phase: event.PhaseDone},
		event.Event{T: end, Kind: event.KindVerdict, Verdict: &final, Final: true},
		event.Event{T: end, Kind: event.KindEnd, Message: "interrupted", ExitCode: 130})
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].Wall = wall0().Add(evs[i].T)
	}

	kept, err := FromEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := FromEvents(withoutFinal(evs))
	if err != nil {
		t.Fatal(err)
	}
	if !rebuilt.Recomputed || kept.Recomputed {
		t.Fatalf("recomputed: kept %v rebuilt %v", kept.Recomputed, rebuilt.Recomputed)
	}
	if len(kept.Verdict.Checks) != len(rebuilt.Verdict.Checks) {
		t.Fatalf("checks: run %+v, rebuilt %+v", kept.Verdict.Checks, rebuilt.Verdict.Checks)
	}
	for i, c := range kept.Verdict.Checks {
		if rebuilt.Verdict.Checks[i] != c {
			t.Errorf("check %s: run %+v, rebuilt %+v", c.Name, c, rebuilt.Verdict.Checks[i])
		}
	}
	if fm := kept.Verdict.Checks[1]; fm.Name != check.NameFaultedBound || fm.Passed || fm.Detail != "28 requests naming the faulted source are in flight past 15.0s (oldest 29.0s)" {
		t.Errorf("faulted_max = %+v; want failed by the pulls cut short past the bound", fm)
	}
}
