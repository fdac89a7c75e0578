package exporter

import (
	"runtime"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// BenchmarkJudgeMemory feeds a soak's events (two sources at 100 trials/s
// in all, 100 ms batches of pull starts and samples, a stall window a
// minute on alternate sources) to the run's judge as the experiment does,
// with the exporter fed the same events (exporter=on) and without it
// (exporter=off), and reports the heap kept per trial once both are warm:
// the exporter keeps counters per source and the pulls in flight only, so
// its figure is that of the judge alone, ~0 B/trial.
func BenchmarkJudgeMemory(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "exporter=off"
		if on {
			name = "exporter=on"
		}
		b.Run(name, func(b *testing.B) {
			bounds := check.DefaultBounds()
			j := check.NewJudge(check.Setup{Bounds: bounds, Sources: 2})
			var s *Stream
			if on {
				s = newAt(time.Now).Stream()
			}
			feed := func(ev event.Event) {
				ev.Arm, ev.Wall = "main", wall0.Add(ev.T)
				if s != nil {
					s.Feed(ev)
				}
			}
			info := event.RunInfo{Arm: "main", Case: "none", Sources: 2, Interval: 20 * time.Millisecond, Bounds: bounds}
			feed(event.Event{Kind: event.KindRun, Run: &info})
			var trial int64
			at := time.Duration(0)
			var starts []event.PullStart
			var samples []event.Sample
			step := func(n int) {
				for range n {
					src := int(trial % 2)
					starts = append(starts, event.PullStart{Source: src, Trial: trial, Start: at})
					samples = append(samples, event.Sample{Source: src, Trial: trial, Start: at, Latency: 20 * time.Millisecond,
						Status: 200, CachedTokens: 128, Peer: "127.0.0.1:7777"})
					trial++
					at += 10 * time.Millisecond
					if at%(100*time.Millisecond) == 0 {
						for _, p := range starts {
							j.Started(p)
						}
						feed(event.Event{Kind: event.KindPullStart, T: at, Pulls: starts})
						for _, s := range samples {
							j.Ended(s)
						}
						feed(event.Event{Kind: event.KindSamples, T: at, Samples: samples})
						starts, samples = nil, nil
					}
					if at%time.Minute == 0 {
						w := event.Window{Source: int(at/time.Minute) % 2, Start: at, Recovers: true, Kind: "stall"}
						j.Open(w)
						feed(event.Event{Kind: event.KindWindow, T: at, Window: &w})
					}
					if at%time.Minute == 20*time.Second {
						w := event.Window{Source: int(at/time.Minute) % 2, Start: at - 20*time.Second, End: at, Recovers: true, Kind: "stall"}
						j.Close(w)
						feed(event.Event{Kind: event.KindWindow, T: at, Window: &w})
					}
					if at%time.Second == 0 {
						j.Advance(at)
						for _, v := range j.Settled() {
							feed(event.Event{Kind: event.KindWindowVerdict, T: at, WindowVerdict: &v})
						}
						v, _ := j.Verdict(at, at, false)
						feed(event.Event{Kind: event.KindVerdict, T: at, Verdict: &v})
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
			step(30_000) // five minutes: every series made, the judge's exact latencies past 4,096
			before := heap()
			b.ResetTimer()
			step(b.N)
			b.StopTimer()
			after := heap()
			b.ReportMetric(float64(int64(after)-int64(before))/float64(b.N), "B/trial")
		})
	}
}
