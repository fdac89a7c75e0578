package ui

import (
	"runtime"
	"testing"
	"time"

	"p2pfault/event"
)

// BenchmarkStateRetainsNothingPerTrial feeds the dashboard's state a soak
// at 100 trials/s (two sources, 100 ms batches of pull starts and samples,
// a live verdict every second carrying the unsettled windows and the
// per-kind summary, a fault window every minute settled by its
// window_verdict event) and reports the heap it keeps per pull after a
// warm-up: the chart keeps a fixed window (the ring and keep), the
// windows at most maxWindowRows, so the target is ~0 B/trial.
func BenchmarkStateRetainsNothingPerTrial(b *testing.B) {
	st := newState(16384, 200)
	keep := time.Minute
	var trial int64
	at := time.Duration(0)
	index := 0
	var starts []event.PullStart
	var samples []event.Sample
	step := func(n int) {
		for range n {
			for src := range 2 {
				trial++
				starts = append(starts, event.PullStart{Source: src, Trial: trial, Start: at})
				samples = append(samples, event.Sample{Source: src, Trial: trial, Start: at, Latency: 20 * time.Millisecond,
					Status: 200, CachedTokens: 128})
			}
			at += 20 * time.Millisecond
			if at%(100*time.Millisecond) == 0 {
				st.apply(event.Event{Kind: event.KindPullStart, T: at, Pulls: starts}, keep)
				st.apply(event.Event{Kind: event.KindSamples, T: at, Samples: samples}, keep)
				starts, samples = nil, nil
			}
			if at%time.Minute == 0 {
				index++
				w := event.WindowVerdict{Index: index, Kind: "stall", Source: index % 2, Start: at - 30*time.Second,
					End: at - 10*time.Second, Recovers: true, Passed: true, Settled: true,
					Checks: []event.Result{{Name: "all_200", Passed: true, Detail: "all 200"}}}
				st.apply(event.Event{Kind: event.KindWindowVerdict, T: at, WindowVerdict: &w}, keep)
			}
			if at%time.Second == 0 {
				v := event.Verdict{Passed: true, Checks: []event.Result{{Name: "all_200", Passed: true, Detail: "all 200"}},
					Kinds: []event.KindSummary{{Kind: "stall", Count: index, Passed: index}}}
				st.apply(event.Event{Kind: event.KindVerdict, T: at, Verdict: &v}, keep)
			}
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// 30 minutes at 100 trials/s: the rings full, maxWindowRows windows
	// are not reached yet, so the windows kept are counted too (O(1) per
	// window, bounded).
	step(90_000)
	before := heap()
	b.ResetTimer()
	step(b.N)
	b.StopTimer()
	after := heap()
	b.ReportMetric(float64(int64(after)-int64(before))/float64(2*b.N), "B/trial")
}
