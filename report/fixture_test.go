package report

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// Synthetic runs shaped like the seed's rows, with the clock pinned so
// every report is the same bytes on every machine.

// wall0 is the wall clock at t0 of every fixture run.
func wall0() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

const (
	ms          = time.Millisecond
	runDuration = 70 * time.Second
)

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

type fixture struct {
	arm, kase string
	window    event.Window
	samples   []event.Sample
	content   int // --content-tokens of the run (0: no content check)
}

func hit(src int, start, lat time.Duration) event.Sample {
	return event.Sample{Source: src, Start: start, Latency: lat, Status: 200, SeedStatus: 200,
		SeedLatency: 5 * ms, PromptTokens: 400, CachedTokens: 384}
}

func missed(src int, start, lat time.Duration) event.Sample {
	s := hit(src, start, lat)
	s.CachedTokens = 0
	return s
}

// seedRun builds a two-source run: source 0 faulted in w, n faulted pulls
// with latencies lat(i), source 1 hitting all along (its slowest healthyMax),
// recN pulls on source 0 in the recovery window of which recHits hit.
func seedRun(arm, kase string, w event.Window, n int, lat func(i int) time.Duration, healthyMax time.Duration, recN, recHits int) fixture {
	var out []event.Sample
	for t := time.Duration(0); t < w.Start; t += 500 * ms {
		out = append(out, hit(0, t, 10*ms), hit(1, t, 10*ms))
	}
	span := w.End - w.Start
	for i := range n {
		out = append(out, missed(0, w.Start+span*time.Duration(i)/time.Duration(n), lat(i)))
	}
	for i, t := 0, w.Start; t < w.End; i, t = i+1, t+500*ms {
		l := 20 * ms
		if i == 7 {
			l = healthyMax
		}
		out = append(out, hit(1, t, l))
	}
	if w.Recovers {
		for i := range recN {
			s := hit(0, w.End+time.Duration(i)*490*ms, 10*ms)
			if i >= recHits {
				s = missed(0, s.Start, s.Latency)
			}
			out = append(out, s)
		}
		for t := w.End + 25*time.Second; t < runDuration; t += 500 * ms {
			out = append(out, hit(0, t, 10*ms))
		}
		for t := w.End; t < runDuration; t += 500 * ms {
			out = append(out, hit(1, t, 10*ms))
		}
	}
	slices.SortStableFunc(out, func(a, b event.Sample) int { return cmp.Compare(a.Start, b.Start) })
	for i := range out {
		out[i].Trial = int64(i)
	}
	return fixture{arm: arm, kase: kase, window: w, samples: out}
}

func stallWindow() event.Window {
	return event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true}
}

// mainStall is the seed's failing row:
// | main | stall | FAIL | 16.85 s / 30.04 s | 60/60, 0.07 s | 43/51 |
func mainStall() fixture {
	return seedRun("main", "stall", stallWindow(), 54, func(i int) time.Duration {
		switch {
		case i < 26:
			return sec(8)
		case i < 28:
			return sec(16.85)
		case i < 53:
			return sec(20)
		}
		return sec(30.04)
	}, 70*ms, 51, 43)
}

// fixedStall is the seed's "+ #64501" stall row, which passes.
func fixedStall() fixture {
	return seedRun("+ #64501", "stall", stallWindow(), 56, func(i int) time.Duration {
		if i == 0 {
			return sec(7.08)
		}
		return 10 * ms
	}, 60*ms, 51, 41)
}

// mainRemove is the seed's remove row: no recovery window.
func mainRemove() fixture {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: runDuration}
	return seedRun("main", "remove", w, 120, func(i int) time.Duration {
		if i == 3 {
			return 20 * ms
		}
		return 10 * ms
	}, 30*ms, 0, 0)
}

func (f fixture) info() event.RunInfo {
	return event.RunInfo{
		Arm: f.arm, Case: f.kase, Engine: "sim", TimeScale: 1, Sources: 2,
		Interval: 500 * ms, FaultAt: f.window.Start, FaultFor: f.window.End - f.window.Start,
		Duration: runDuration, Timeline: "10s " + f.kase + " source-0", Bounds: check.DefaultBounds(),
		Model: "sim-model", Started: wall0().Add(-5 * time.Second),
		ContentTokens: f.content, ContentMatch: map[bool]string{true: "exact"}[f.content > 0],
	}
}

// events is the fixture's event stream as experiment would write it:
// samples in batches once a second as they finish, the window opening and
// closing, the final verdict and the end event.
func (f fixture) events() []event.Event {
	info := f.info()
	var evs []event.Event
	add := func(ev event.Event) { evs = append(evs, ev) }
	add(event.Event{T: -5 * time.Second, Kind: event.KindRun, Run: &info})
	add(event.Event{T: -5 * time.Second, Kind: event.KindPhase, Phase: event.PhaseWarmup})
	add(event.Event{T: 0, Kind: event.KindPhase, Phase: event.PhaseBaseline})
	open := f.window
	open.End = 0
	add(event.Event{T: f.window.Start, Kind: event.KindWindow, Window: &open})
	add(event.Event{T: f.window.Start, Kind: event.KindPhase, Phase: event.PhaseFault})
	if f.window.End < runDuration {
		closed := f.window
		add(event.Event{T: f.window.End, Kind: event.KindWindow, Window: &closed})
		add(event.Event{T: f.window.End, Kind: event.KindPhase, Phase: event.PhaseRecovery})
	}
	batches := map[time.Duration][]event.Sample{}
	last := runDuration
	for _, s := range f.samples {
		at := (s.End()/time.Second + 1) * time.Second
		batches[at] = append(batches[at], s)
		last = max(last, at)
	}
	for at, b := range batches {
		add(event.Event{T: at, Kind: event.KindSamples, Samples: b})
	}
	add(event.Event{T: runDuration, Kind: event.KindPhase, Phase: event.PhaseDone})
	v := f.verdict(info)
	add(event.Event{T: last + 100*ms, Kind: event.KindVerdict, Verdict: &v, Final: true})
	code := 0
	if !v.Passed {
		code = 1
	}
	add(event.Event{T: last + 100*ms, Kind: event.KindEnd, Message: "run complete", ExitCode: code})

	// Order by time (map order is random), then number them.
	slices.SortStableFunc(evs, func(a, b event.Event) int { return cmp.Compare(a.T, b.T) })
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].Wall = wall0().Add(evs[i].T)
	}
	return evs
}

// verdict is the run's final verdict as the judge gives it, with the
// fields a stream written before verdicts carried times, windows and the
// steady state has (FromEvents fills those in from its own judging).
func (f fixture) verdict(info event.RunInfo) event.Verdict {
	v, _ := check.JudgeRun(check.RunFacts{
		Setup: check.Setup{Bounds: info.Bounds, Sources: info.Sources, Scripted: info.Timeline != "",
			Content: check.ContentRuleOf(info)},
		Windows: []event.Window{f.window}, Samples: f.samples, Now: runDuration, RunEnd: runDuration,
	})
	return event.Verdict{Passed: v.Passed, Checks: v.Checks, Summary: v.Summary}
}

// run is the fixture as FromEvents rebuilds it from its events.
func (f fixture) run(t testing.TB) Run {
	t.Helper()
	r, err := FromEvents(f.events())
	if err != nil {
		t.Fatalf("fixture %s/%s: %v", f.arm, f.kase, err)
	}
	return r
}
