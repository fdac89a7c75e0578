package check

import (
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

const ms = time.Millisecond

// The seed's timeline: fault on source 0 at 10 s, window closes at 40 s
// (SIGCONT), the probe stops at 70 s; recovery window [40 s, 65 s).
func seedWindow() event.Window {
	return event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true}
}

const seedRunEnd = 70 * time.Second

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// pull is a 200 pull that hits unless changed by the caller.
func pull(source int, start, latency time.Duration) event.Sample {
	return event.Sample{Source: source, Start: start, Latency: latency, Status: 200, PromptTokens: 400, CachedTokens: 384}
}

func miss(s event.Sample) event.Sample { s.CachedTokens = 0; return s }

// cutShort is a pull still in flight when the run ended early: no answer.
func cutShort(s event.Sample) event.Sample {
	s.Status, s.CachedTokens, s.Err, s.Aborted = 0, 0, "POST http://decoder/v1/completions: no answer: probe aborted", true
	return s
}

func failed(s event.Sample, status int, err string) event.Sample {
	s.Status, s.Err, s.CachedTokens = status, err, 0
	return s
}

// healthyRun is a run in which every check holds: both sources probed once
// a second from 0 to 70 s, all hits, 10 ms each.
func healthyRun() []event.Sample {
	var out []event.Sample
	trial := int64(0)
	for t := time.Duration(0); t < seedRunEnd; t += time.Second {
		for src := range 2 {
			s := pull(src, t, 10*ms)
			s.Trial = trial
			trial++
			out = append(out, s)
		}
	}
	return out
}

// replace swaps the pull of source src started at t in samples for s.
func replace(samples []event.Sample, s event.Sample) []event.Sample {
	out := make([]event.Sample, 0, len(samples))
	for _, x := range samples {
		if x.Source == s.Source && x.Start == s.Start {
			continue
		}
		out = append(out, x)
	}
	return append(out, s)
}

// with returns a new slice of base and extra, never sharing base's array,
// so table cases built from one base cannot overwrite each other.
func with(base []event.Sample, extra ...event.Sample) []event.Sample {
	return slices.Concat(base, extra)
}

func only(samples []event.Sample, keep func(event.Sample) bool) []event.Sample {
	var out []event.Sample
	for _, s := range samples {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func evalSeed(samples []event.Sample) event.Verdict {
	return Evaluate(Input{Samples: samples, Window: seedWindow(), RunEnd: seedRunEnd, Bounds: DefaultBounds()})
}

func result(t *testing.T, v event.Verdict, name string) event.Result {
	t.Helper()
	for _, r := range v.Checks {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("check %s missing from verdict %+v", name, v.Checks)
	return event.Result{}
}

type checkCase struct {
	name       string
	samples    []event.Sample
	wantPass   bool
	wantEmpty  bool
	wantDetail string // substring, or the exact detail when exact is set
	exact      bool
}

func runCheckCases(t *testing.T, check string, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := result(t, evalSeed(tc.samples), check)
			if r.Passed != tc.wantPass || r.Empty != tc.wantEmpty {
				t.Fatalf("%s: passed=%v empty=%v, want passed=%v empty=%v (detail %q)",
					check, r.Passed, r.Empty, tc.wantPass, tc.wantEmpty, r.Detail)
			}
			if tc.exact && r.Detail != tc.wantDetail {
				t.Fatalf("detail = %q, want %q", r.Detail, tc.wantDetail)
			}
			if !tc.exact && !strings.Contains(r.Detail, tc.wantDetail) {
				t.Fatalf("detail = %q, want it to contain %q", r.Detail, tc.wantDetail)
			}
		})
	}
}

func TestHealthyRunPassesEveryCheck(t *testing.T) {
	v := evalSeed(healthyRun())
	if !v.Passed {
		t.Fatalf("verdict failed: %+v", v.Checks)
	}
	want := []string{NameAll200, NameFaultedBound, NameFaultedMedian, NameHealthy, NameRecovery}
	if len(v.Checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %+v", len(v.Checks), len(want), v.Checks)
	}
	for i, name := range want {
		if v.Checks[i].Name != name {
			t.Errorf("check %d = %s, want %s", i, v.Checks[i].Name, name)
		}
	}
}

func TestAll200(t *testing.T) {
	base := healthyRun()
	runCheckCases(t, NameAll200, []checkCase{
		{name: "every pull 200 passes", samples: base, wantPass: true,
			wantDetail: "all 140 decoder requests returned 200", exact: true},
		{name: "a timed-out pull fails naming the first one",
			samples: replace(replace(base,
				failed(pull(1, 30*time.Second, 30*time.Second), 503, "")),
				failed(pull(0, 12*time.Second, 30*time.Second), 0, "timeout")),
			wantDetail: "2 of 140 decoder requests did not return 200 (first: source 0 at 12.0s: status 0: timeout)", exact: true},
		{name: "a non-200 during warm-up (before t0) is ignored",
			samples: with(base, failed(pull(0, -time.Second, 10*ms), 500, "boom")), wantPass: true},
		{name: "a non-200 sent at the run end is ignored",
			samples: with(base, failed(pull(0, seedRunEnd, 10*ms), 500, "boom")), wantPass: true},
		{name: "a non-200 sent just before the run end counts",
			samples:    with(base, failed(pull(0, seedRunEnd-time.Nanosecond, 10*ms), 500, "")),
			wantDetail: "1 of 141 decoder requests did not return 200 (first: source 0 at 70.0s: status 500)", exact: true},
		{name: "no pull at all is an empty window", samples: nil, wantEmpty: true,
			wantDetail: "empty window: no decoder request started in [0.0s, 70.0s)", exact: true},
		{name: "pulls cut short by an early end may still have returned 200: not failed, and said so",
			samples: replace(replace(base, cutShort(pull(0, 69*time.Second, 900*ms))), cutShort(pull(1, 69*time.Second, 900*ms))), wantPass: true,
			wantDetail: "all 138 decoder requests returned 200; 2 in flight with no answer yet (oldest 0.9s)", exact: true},
	})
}

func TestFaultedMax(t *testing.T) {
	base := healthyRun()
	at := func(lat time.Duration) []event.Sample { return replace(base, miss(pull(0, 11*time.Second, lat))) }
	runCheckCases(t, NameFaultedBound, []checkCase{
		{name: "just under the bound passes", samples: at(15*time.Second - time.Nanosecond), wantPass: true},
		{name: "exactly at the bound passes", samples: at(15 * time.Second), wantPass: true,
			wantDetail: "30 requests naming the faulted source each ended within 15.0s (max 15.00s)", exact: true},
		{name: "just over the bound fails", samples: at(15*time.Second + time.Nanosecond),
			wantDetail: "took 15.0s (bound 15.0s)"},
		{name: "the seed's stall fails with the seed's message", samples: at(sec(30.04)),
			wantDetail: "a request naming the faulted source took 30.0s (bound 15.0s)", exact: true},
		{name: "a slow pull sent just before the window is ignored",
			samples: replace(base, pull(0, 10*time.Second-time.Nanosecond, 30*time.Second)), wantPass: true},
		{name: "a slow pull sent when the window closes is ignored",
			samples: replace(base, pull(0, 40*time.Second, 30*time.Second)), wantPass: true},
		{name: "a slow pull naming the healthy source is not the faulted one's",
			samples: replace(base, pull(1, 20*time.Second, 16*time.Second)), wantPass: true},
		{name: "no pull naming the faulted source in the window is an empty window",
			samples: only(base, func(s event.Sample) bool {
				return s.Source != 0 || s.Start < 10*time.Second || s.Start >= 40*time.Second
			}),
			wantEmpty:  true,
			wantDetail: "empty window: no pull naming the faulted source started in [10.0s, 40.0s)", exact: true},
		{name: "a pull cut short before the bound breaks nothing, and is said",
			samples: replace(base, cutShort(pull(0, 30*time.Second, 14*time.Second))), wantPass: true,
			wantDetail: "29 requests naming the faulted source each ended within 15.0s (max 0.01s); 1 in flight, oldest 14.0s", exact: true},
		{name: "a pull cut short after waiting past the bound is pending past it: failed",
			samples:    replace(base, cutShort(pull(0, 20*time.Second, 16*time.Second))),
			wantDetail: "1 request naming the faulted source is in flight past 15.0s (oldest 16.0s)", exact: true},
		{name: "a slow pull and one in flight past the bound: both said",
			samples:    replace(replace(base, cutShort(pull(0, 20*time.Second, 16*time.Second))), pull(0, 11*time.Second, 30*time.Second)),
			wantDetail: "a request naming the faulted source took 30.0s (bound 15.0s); 1 request naming the faulted source is in flight past 15.0s (oldest 16.0s)", exact: true},
		{name: "only cut-short pulls under the bound leave the window empty",
			samples: append(only(base, func(s event.Sample) bool {
				return s.Source != 0 || s.Start < 10*time.Second || s.Start >= 40*time.Second
			}), cutShort(pull(0, 39*time.Second, time.Second))),
			wantEmpty:  true,
			wantDetail: "none ended yet: 1 pull naming the faulted source started in [10.0s, 40.0s) is in flight, oldest 1.0s", exact: true},
	})
}

// medianRun puts the given latencies on the faulted source's pulls from the
// detect point (12 s) on, and drops the rest of that stretch, so the median
// is exactly that of lats.
func medianRun(lats ...time.Duration) []event.Sample {
	out := only(healthyRun(), func(s event.Sample) bool {
		return s.Source != 0 || s.Start < 12*time.Second || s.Start >= 40*time.Second
	})
	for i, l := range lats {
		out = append(out, miss(pull(0, 12*time.Second+time.Duration(i)*time.Second, l)))
	}
	return out
}

func TestFaultedMedianAfterDetect(t *testing.T) {
	runCheckCases(t, NameFaultedMedian, []checkCase{
		{name: "odd count: median exactly at the bound passes",
			samples: medianRun(10*ms, 2*time.Second, 14*time.Second), wantPass: true,
			wantDetail: "3 requests naming the faulted source from 12.0s on took 2.00s at the median (bound 2.0s)", exact: true},
		{name: "odd count: median just over the bound fails",
			samples:    medianRun(10*ms, 2*time.Second+time.Nanosecond, 14*time.Second),
			wantDetail: "took 2.00s at the median (bound 2.0s)"},
		{name: "odd count: median just under the bound passes",
			samples: medianRun(10*ms, 2*time.Second-time.Nanosecond, 14*time.Second), wantPass: true},
		{name: "even count: mean of the middle two at the bound passes",
			samples: medianRun(10*ms, 1*time.Second, 3*time.Second, 14*time.Second), wantPass: true},
		{name: "even count: mean of the middle two just over the bound fails",
			samples: medianRun(10*ms, 1*time.Second, 3*time.Second+2*time.Nanosecond, 14*time.Second)},
		{name: "the seed's stall fails",
			samples:    medianRun(sec(8), sec(16.85), sec(16.85), sec(30.04), sec(10)),
			wantDetail: "took 16.85s at the median (bound 2.0s)"},
		{name: "slow pulls before the detect point do not count",
			samples: with(medianRun(10*ms), miss(pull(0, 11*time.Second, 14*time.Second)),
				miss(pull(0, 12*time.Second-time.Nanosecond, 14*time.Second))), wantPass: true},
		{name: "pulls only before the detect point is an empty window",
			samples: medianRun(), wantEmpty: true,
			wantDetail: "empty window: no pull naming the faulted source started in [12.0s, 40.0s)", exact: true},
	})
}

// healthyWindow replaces the healthy source's pulls in the fault window
// with n pulls of which hits hit, the first one taking maxLat.
func healthyWindow(n, hits int, maxLat time.Duration) []event.Sample {
	out := only(healthyRun(), func(s event.Sample) bool {
		return s.Source != 1 || s.Start < 10*time.Second || s.Start >= 40*time.Second
	})
	for i := range n {
		s := pull(1, 10*time.Second+time.Duration(i)*time.Second, 10*ms)
		if i == 0 {
			s.Latency = maxLat
		}
		if i >= hits {
			s = miss(s)
		}
		out = append(out, s)
	}
	return out
}

func TestHealthyKeepsHitting(t *testing.T) {
	runCheckCases(t, NameHealthy, []checkCase{
		{name: "hit rate exactly at 90% passes", samples: healthyWindow(10, 9, 10*ms), wantPass: true,
			wantDetail: "pulls naming a healthy source hit 9 of 10 (bound 90%), max 0.01s (bound 5.0s)", exact: true},
		{name: "hit rate just over 90% passes", samples: healthyWindow(30, 28, 10*ms), wantPass: true},
		{name: "hit rate just under 90% fails", samples: healthyWindow(30, 26, 10*ms),
			wantDetail: "pulls naming a healthy source hit 26 of 30 (87%, bound 90%)", exact: true},
		{name: "max exactly at 5 s passes", samples: healthyWindow(10, 10, 5*time.Second), wantPass: true},
		{name: "max just under 5 s passes", samples: healthyWindow(10, 10, 5*time.Second-time.Nanosecond), wantPass: true},
		{name: "max just over 5 s fails", samples: healthyWindow(10, 10, 5*time.Second+time.Nanosecond),
			wantDetail: "a request naming a healthy source took 5.0s (bound 5.0s)", exact: true},
		{name: "both failing says both", samples: healthyWindow(10, 5, 6*time.Second),
			wantDetail: "hit 5 of 10 (50%, bound 90%); a request naming a healthy source took 6.0s (bound 5.0s)"},
		{name: "misses outside the fault window are ignored",
			samples: with(healthyWindow(10, 10, 10*ms),
				miss(pull(1, 10*time.Second-time.Nanosecond, 6*time.Second)),
				miss(pull(1, 40*time.Second, 6*time.Second))), wantPass: true},
		{name: "no healthy pull in the window is an empty window", samples: healthyWindow(0, 0, 0), wantEmpty: true,
			wantDetail: "empty window: no pull naming a healthy source started in [10.0s, 40.0s)", exact: true},
	})
}

// recoveryRun keeps the faulted source's pulls in the recovery window
// [40 s, 65 s) to n, of which hits hit.
func recoveryRun(n, hits int) []event.Sample {
	out := only(healthyRun(), func(s event.Sample) bool {
		return s.Source != 0 || s.Start < 40*time.Second || s.Start >= 65*time.Second
	})
	for i := range n {
		s := pull(0, 40*time.Second+time.Duration(i)*400*ms, 10*ms)
		if i >= hits {
			s = miss(s)
		}
		out = append(out, s)
	}
	return out
}

func TestRecoveryHitsAgain(t *testing.T) {
	runCheckCases(t, NameRecovery, []checkCase{
		{name: "exactly half hit passes", samples: recoveryRun(50, 25), wantPass: true,
			wantDetail: "after the fault window, 25 of 50 pulls naming the faulted source hit (50%, bound 50%)", exact: true},
		{name: "just over half passes", samples: recoveryRun(51, 26), wantPass: true},
		{name: "just under half fails", samples: recoveryRun(51, 25),
			wantDetail: "25 of 51 pulls naming the faulted source hit (49%, bound 50%)"},
		{name: "misses after the recovery window are ignored",
			samples:  with(recoveryRun(4, 2), miss(pull(0, 65*time.Second, 10*ms)), miss(pull(0, 66*time.Second, 10*ms))),
			wantPass: true},
		{name: "no pull in the recovery window is an empty window", samples: recoveryRun(0, 0), wantEmpty: true,
			wantDetail: "empty window: no pull naming the faulted source started in [40.0s, 65.0s)", exact: true},
	})
}

func TestRecoveryWindowIsCutAtRunEnd(t *testing.T) {
	samples := recoveryRun(10, 0) // misses at 40 .. 43.6 s
	samples = append(samples, pull(0, 45*time.Second, 10*ms))
	v := Evaluate(Input{Samples: samples, Window: seedWindow(), RunEnd: 45 * time.Second, Bounds: DefaultBounds()})
	r := result(t, v, NameRecovery)
	if r.Passed || v.Summary.Recovery.N != 10 || v.Summary.Recovery.Pulled != 0 {
		t.Fatalf("recovery = %+v, summary %+v; want the 10 misses in [40s, 45s) only", r, v.Summary.Recovery)
	}

	v = Evaluate(Input{Samples: samples, Window: seedWindow(), RunEnd: 40 * time.Second, Bounds: DefaultBounds()})
	r = result(t, v, NameRecovery)
	if !r.Empty || r.Detail != "empty window: no pull naming the faulted source started in [40.0s, 40.0s)" {
		t.Fatalf("run ending with the fault window: recovery = %+v, want an empty window", r)
	}
}

func TestRemoveOmitsRecoveryCheck(t *testing.T) {
	w := seedWindow()
	w.Recovers = false
	w.End = seedRunEnd
	v := Evaluate(Input{Samples: healthyRun(), Window: w, RunEnd: seedRunEnd, Bounds: DefaultBounds()})
	for _, r := range v.Checks {
		if r.Name == NameRecovery {
			t.Fatalf("recovery check present for a window that does not recover: %+v", r)
		}
	}
	if len(v.Checks) != 4 || !v.Passed {
		t.Fatalf("verdict = %+v, want 4 passing checks", v)
	}
	if v.Summary.Recovery != (event.Stats{}) {
		t.Fatalf("recovery summary = %+v, want zero", v.Summary.Recovery)
	}
}

func TestAnyFailingCheckFailsTheVerdict(t *testing.T) {
	v := evalSeed(replace(healthyRun(), miss(pull(0, 11*time.Second, 30*time.Second))))
	if v.Passed {
		t.Fatal("verdict passed with faulted_max failing")
	}
	for _, r := range v.Checks {
		if r.Passed == (r.Name == NameFaultedBound) {
			t.Errorf("check %s passed=%v, want only faulted_max to fail", r.Name, r.Passed)
		}
	}
}

func TestBadWindowFailsAsEmptyWithoutPanic(t *testing.T) {
	w := event.Window{Source: 7, Start: 40 * time.Second, End: 10 * time.Second, Recovers: true}
	v := Evaluate(Input{Samples: healthyRun(), Window: w, RunEnd: seedRunEnd, Bounds: DefaultBounds()})
	if v.Passed {
		t.Fatalf("a window that ends before it starts passed: %+v", v.Checks)
	}
	for _, r := range v.Checks[1:] {
		if !r.Empty {
			t.Errorf("check %s over a backwards window: %+v, want empty", r.Name, r)
		}
	}
}

func TestSummaryMatchesSeedLine(t *testing.T) {
	// 54 misses naming source 0 in the window, latencies chosen so the
	// median is 16.85 s and the max 30.04 s, as in the seed.
	var samples []event.Sample
	for i := range 54 {
		lat := sec(16.85)
		switch {
		case i < 26:
			lat = sec(8)
		case i == 53:
			lat = sec(30.04)
		case i > 27:
			lat = sec(20)
		}
		samples = append(samples, miss(pull(0, 10*time.Second+time.Duration(i)*500*ms, lat)))
	}
	samples = append(samples, only(healthyRun(), func(s event.Sample) bool { return s.Source == 1 })...)
	v := evalSeed(samples)
	got := v.Summary.Faulted.SeedLine("faulted")
	want := "fault faulted: n=54 pulled=0 p50=16.85s max=30.04s"
	if got != want {
		t.Fatalf("seed line = %q, want %q", got, want)
	}
	if got, want := v.Summary.Healthy.SeedLine("healthy"), "fault healthy: n=30 pulled=30 p50=0.01s max=0.01s"; got != want {
		t.Fatalf("healthy seed line = %q, want %q", got, want)
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none is zero", nil, 0},
		{"one is itself", []time.Duration{7}, 7},
		{"odd count takes the middle of the sorted values", []time.Duration{9, 1, 5}, 5},
		{"even count takes the mean of the two middle values", []time.Duration{4, 1, 10, 2}, 3},
		{"even count mean of odd nanoseconds rounds down", []time.Duration{1, 2}, 1},
		{"two huge values do not overflow", []time.Duration{1<<62 + 1, 1<<62 + 1}, 1<<62 + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.in...)
			if got := Median(in); got != tc.want {
				t.Fatalf("Median(%v) = %d, want %d", tc.in, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("Median reordered its input: %v", in)
				}
			}
		})
	}
}

// BenchmarkJudgeRun is the judge's cost per pull over a finished run
// (what `p2pfault report` pays; the oracle's cost does not matter).
func BenchmarkJudgeRun(b *testing.B) {
	// A 60-s run of 4 sources at the default 2 pulls per second per source.
	var samples []event.Sample
	trial := int64(0)
	for t := time.Duration(0); t < 60*time.Second; t += 500 * ms {
		for src := range 4 {
			trial++
			s := pull(src, t, 10*ms)
			s.Trial = trial
			samples = append(samples, s)
		}
	}
	f := RunFacts{Setup: Setup{Bounds: DefaultBounds(), Sources: 4, Scripted: true}, Samples: samples,
		Windows: []event.Window{{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true}},
		Now:     60 * time.Second, RunEnd: 60 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		JudgeRun(f)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(samples)), "ns/sample")
}
