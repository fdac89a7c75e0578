package check

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// exactQuantile is the nearest-rank percentile p of d, the definition
// HdrHistogram's ValueAtPercentile follows.
func exactQuantile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(p/100*float64(len(s)) + 0.5)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

func TestHistPercentilesWithinTheirPrecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	h := NewHist()
	var all []time.Duration
	for range 20000 {
		// Mostly fast pulls, a tail of slow ones, as a stall gives.
		d := time.Duration(rng.ExpFloat64() * float64(30*ms))
		if rng.IntN(50) == 0 {
			d = 8*time.Second + time.Duration(rng.Float64()*float64(22*time.Second))
		}
		h.Record(d)
		all = append(all, d)
	}
	p := h.Percentiles()
	if p.N != len(all) || p.Max != slices.Max(all) {
		t.Fatalf("n %d max %s; want %d, %s (exact)", p.N, p.Max, len(all), slices.Max(all))
	}
	for _, q := range []struct {
		p   float64
		got time.Duration
	}{{50, p.P50}, {90, p.P90}, {99, p.P99}} {
		want := exactQuantile(all, q.p)
		// Three significant digits, plus the microsecond unit.
		if diff := (q.got - want).Abs(); float64(diff) > 0.001*float64(want)+float64(time.Microsecond) {
			t.Errorf("p%.0f = %s, exact %s: off by %s, more than 0.1%%", q.p, q.got, want, diff)
		}
	}
}

func TestHistEdges(t *testing.T) {
	h := NewHist()
	if p := h.Percentiles(); p != (event.Percentiles{}) {
		t.Errorf("empty: %+v, want zero", p)
	}
	h.Record(-time.Second)  // a clock step: counted as 0
	h.Record(2 * time.Hour) // past the range: counted at its top, Max exact
	p := h.Percentiles()
	if p.N != 2 || p.Max != 2*time.Hour || p.P99 > 2*time.Hour || p.P50 != 0 {
		t.Errorf("got %+v; want n 2, p50 0, max 2h", p)
	}
	o := NewHist()
	o.Record(3 * time.Second)
	h.Merge(o)
	if h.N() != 3 || h.Max() != 2*time.Hour {
		t.Errorf("merged: n %d max %s", h.N(), h.Max())
	}
}

func TestSteady(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	samples := []event.Sample{
		pull(0, 1*time.Second, 10*ms),
		pull(0, 2*time.Second, 30*ms),
		miss(pull(0, 3*time.Second, 20*ms)),
		failed(pull(0, 4*time.Second, 60*time.Second), 0, "context deadline exceeded"),
		pull(0, 12*time.Second, 9*time.Second), // in the fault window: not steady
		pull(0, 25*time.Second, 40*ms),
		cutShort(pull(0, 29*time.Second, 500*ms)),
		pull(1, 1*time.Second, 15*ms),
		pull(1, 30*time.Second, 15*ms), // at the run's end: not in it
	}
	samples[1].TTFT = 25 * ms
	pending := []event.PullStart{{Source: 1, Trial: 77, Start: 29500 * ms}}
	got := Steady(Input{Samples: samples, Pending: pending, RunEnd: 30 * time.Second}, []event.Window{w}, 3)
	if len(got) != 3 {
		t.Fatalf("%d summaries, want one per source: %+v", len(got), got)
	}
	s0, s1, s2 := got[0], got[1], got[2]
	if s0.Source != 0 || s0.N != 5 || s0.OK != 4 || s0.Errors != 1 || s0.Pulled != 3 || s0.InFlight != 1 {
		t.Errorf("source-0 = %+v; want 5 pulls outside the window, 4 × 200, 1 error, 3 hits, 1 cut short in flight", s0)
	}
	if s0.Latency.Max != 60*time.Second || s0.Latency.P50 < 30*ms || s0.Latency.P50 > 31*ms {
		t.Errorf("source-0 latency %+v; want p50 ≈ 30ms (of 10, 20, 30, 40 ms, 60 s), max 60s", s0.Latency)
	}
	if s0.TTFT == nil || s0.TTFT.N != 1 || s0.TTFT.Max != 25*ms {
		t.Errorf("source-0 TTFT %+v; want the one streamed pull's 25ms", s0.TTFT)
	}
	if s1.N != 1 || s1.InFlight != 1 || s1.TTFT != nil {
		t.Errorf("source-1 = %+v; want 1 pull, 1 in flight, no TTFT", s1)
	}
	if s2.Source != 2 || s2.N != 0 || s2.Latency != (event.Percentiles{}) {
		t.Errorf("source-2 = %+v; want an empty line", s2)
	}

	// A window still open runs to the run's end; with no window every
	// pull counts.
	open := w
	open.End = 0
	if got := Steady(Input{Samples: samples, RunEnd: 30 * time.Second}, []event.Window{open}, 2); got[0].N != 4 {
		t.Errorf("open window from 10 s: source-0 n %d, want 4 (the pulls before it)", got[0].N)
	}
	if got := Steady(Input{Samples: samples, RunEnd: 30 * time.Second}, nil, 2); got[0].N != 6 {
		t.Errorf("no window: source-0 n %d, want 6", got[0].N)
	}
}

// BenchmarkHistRecord records a soak's worth of pulls and reports what the
// histogram holds: it must not grow with the pulls.
func BenchmarkHistRecord(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	h := NewHist()
	for b.Loop() {
		h.Record(20*ms + time.Duration(rng.ExpFloat64()*float64(5*ms)))
	}
	b.ReportMetric(float64(h.h.GetMemorySize()), "hist-B")
}

// TestKeyedStallsAftermathIsNotSteady is the run of issue 27 item 5: a
// stall fired by key (no script) and resumed by key, the faulted source's
// pulls sent after the resume hanging on the stale reconnect. They belong
// to the window's recovery check, not to the source's steady state; the
// pulls after the recovery window and the healthy source's are steady.
func TestKeyedStallsAftermathIsNotSteady(t *testing.T) {
	b := DefaultBounds()
	w := event.Window{Source: 0, Start: 12800 * ms, End: 19600 * ms, Recovers: true, Kind: "stall"}
	var samples []event.Sample
	for at := time.Duration(0); at < 80*time.Second; at += 500 * ms {
		s0 := pull(0, at, 20*ms)
		switch {
		case at >= w.Start && at < w.End:
			s0 = miss(pull(0, at, 10*time.Second))
		case at >= w.End && at < w.End+b.RecoveryWindow:
			s0 = miss(pull(0, at, 30*time.Second)) // hung after the resume
		}
		samples = append(samples, s0, pull(1, at, 20*ms))
	}
	v, _ := JudgeRun(RunFacts{Setup: Setup{Bounds: b, Sources: 2, Scripted: false},
		Windows: []event.Window{w}, Samples: samples, Now: 120 * time.Second, RunEnd: 80 * time.Second})
	var s0, s1 event.SourceSummary
	for _, s := range v.Steady {
		if s.Source == 0 {
			s0 = s
		} else {
			s1 = s
		}
	}
	// source-0: 0–12.8 s (26 pulls) and 44.6–80 s (70 pulls), all fast hits.
	if s0.N != 26+70 || s0.Pulled != s0.N || s0.Latency.Max != 20*ms {
		t.Errorf("source-0 steady %+v; want the 96 pulls outside the window and its recovery window, all fast hits", s0)
	}
	// source-1: all but the 14 sent in the window (a fault window's pulls).
	if s1.N != 160-14 {
		t.Errorf("source-1 steady n %d, want 146", s1.N)
	}
	rec := result(t, v, NameRecovery)
	if !strings.Contains(rec.Detail, "of 50 pulls naming the faulted source") {
		t.Errorf("recovery %q; want the 50 pulls after the resume judged there", rec.Detail)
	}
}

// TestRanksBreakASourceDownByRank: with source-0 of two data-parallel
// ranks, the final verdict gives each rank's pulls by what they were to
// source-0's window (in it, in its recovery, outside both), and none for
// source-1 of one rank: rank 1 stalled in the window, rank 0 fell back
// at once.
func TestRanksBreakASourceDownByRank(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	onRank := func(s event.Sample, r int) event.Sample { s.Rank = r; return s }
	samples := []event.Sample{
		onRank(pull(0, 1*time.Second, 10*ms), 0),
		onRank(pull(0, 2*time.Second, 20*ms), 1),
		onRank(miss(pull(0, 11*time.Second, 5*ms)), 0),
		onRank(miss(pull(0, 12*time.Second, 30*time.Second)), 1),
		onRank(miss(pull(0, 13*time.Second, 35*time.Second)), 1),
		onRank(pull(0, 21*time.Second, 40*ms), 1),
		onRank(pull(0, 50*time.Second, 10*ms), 0),
		pull(1, 12*time.Second, 15*ms),
	}
	v, _ := JudgeRun(RunFacts{Setup: Setup{Bounds: DefaultBounds(), Sources: 2, Ranks: []int{2, 1}, Scripted: true},
		Windows: []event.Window{w}, Samples: samples, Now: 60 * time.Second, RunEnd: 60 * time.Second})
	type row struct {
		rank      int
		part      string
		n, pulled int
		max       time.Duration
	}
	var got []row
	for _, r := range v.Ranks {
		if r.Source != 0 {
			t.Errorf("a breakdown of source-%d, which has one rank: %+v", r.Source, r)
		}
		got = append(got, row{r.Rank, r.Part, r.N, r.Pulled, r.Latency.Max})
	}
	want := []row{
		{0, PartFault, 1, 0, 5 * ms},
		{1, PartFault, 2, 0, 35 * time.Second},
		{1, PartRecovery, 1, 1, 40 * ms},
		{0, PartOutside, 2, 2, 10 * ms},
		{1, PartOutside, 1, 1, 20 * ms},
	}
	if !slices.Equal(got, want) {
		t.Errorf("breakdown\n got %+v\nwant %+v", got, want)
	}
	v, _ = JudgeRun(RunFacts{Setup: Setup{Bounds: DefaultBounds(), Sources: 2, Scripted: true},
		Windows: []event.Window{w}, Samples: samples, Now: 60 * time.Second, RunEnd: 60 * time.Second})
	if len(v.Ranks) != 0 {
		t.Errorf("no source of several ranks: breakdown %+v", v.Ranks)
	}
}
