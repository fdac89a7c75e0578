package ui

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
	"p2pfault/fault"
)

// simulate feeds m a run of length run with one pull every interval per
// source, in 100 ms batches as the live feed delivers them, plus what an
// hour brings besides samples: engine states every second, a live verdict
// every second, log lines, and a stall every ten minutes.
func simulate(tb testing.TB, m Model, sources int, interval, run time.Duration) Model {
	tb.Helper()
	var s script
	s.run(runInfo("none", sources, 1))
	s.upCluster(sources)
	m = update(tb, m, eventsMsg{events: s.events})

	const frame = 100 * time.Millisecond
	var trial int64
	batch := make([]event.Event, 0, 16)
	samples := make([]event.Sample, 0, 1024)
	next := time.Duration(0)
	verdict := liveVerdict(true)
	for t := time.Duration(0); t < run; t += frame {
		batch, samples = batch[:0], samples[:0]
		for ; next < t+frame; next += interval {
			for i := 0; i < sources; i++ {
				trial++
				samples = append(samples, event.Sample{
					Source: i, Trial: trial, Start: next, Latency: time.Duration(10+trial%25) * time.Millisecond,
					Status: 200, PromptTokens: 300, CachedTokens: 256,
				})
			}
		}
		batch = append(batch, event.Event{Kind: event.KindSamples, T: t, Wall: wallAt(t), Samples: samples})
		if t%time.Second == 0 {
			for i := 0; i < sources; i++ {
				batch = append(batch, event.Event{Kind: event.KindEngine, T: t, Wall: wallAt(t),
					Engine: engineInfo(event.SourceName(i), i, event.StateReady, 4200+10*i, warmup+t)})
			}
			batch = append(batch, event.Event{Kind: event.KindVerdict, T: t, Wall: wallAt(t), Verdict: &verdict})
		}
		if t%(10*time.Minute) == time.Minute {
			batch = append(batch,
				event.Event{Kind: event.KindFault, T: t, Wall: wallAt(t), Fault: &event.FaultInfo{Action: fault.ActionStall, Source: 0, Duration: 30 * time.Second, By: "key"}},
				event.Event{Kind: event.KindCondition, T: t, Wall: wallAt(t), Condition: &event.ConditionInfo{Source: 0, Condition: event.CondStalled, Fault: fault.ActionStall, Label: "STALLED", Until: t + 30*time.Second}},
				// The window the stall opens, as the experiment sends it: the chart's mark.
				event.Event{Kind: event.KindWindow, T: t, Wall: wallAt(t), Window: &event.Window{Source: 0, Start: t, Recovers: true}},
				event.Event{Kind: event.KindLog, T: t, Wall: wallAt(t), Log: &event.LogLine{Engine: "decoder", Line: fmt.Sprintf("P2P %d: peer 127.0.0.1:7777 down", t)}},
			)
		}
		if t%(10*time.Minute) == time.Minute+30*time.Second {
			batch = append(batch,
				event.Event{Kind: event.KindFault, T: t, Wall: wallAt(t), Fault: &event.FaultInfo{Action: fault.ActionResume, Source: 0, By: "key"}},
				event.Event{Kind: event.KindCondition, T: t, Wall: wallAt(t), Condition: &event.ConditionInfo{Source: 0, Condition: event.CondUp, Label: "READY"}},
				event.Event{Kind: event.KindWindow, T: t, Wall: wallAt(t), Window: &event.Window{Source: 0, Start: t - 30*time.Second, End: t, Recovers: true}},
			)
		}
		m = update(tb, m, eventsMsg{events: batch})
	}
	return m
}

func newBenchModel(now time.Duration) Model {
	return New(newFakeCtrl(), nil, Options{Now: func() time.Time { return wallAt(now) }, Renderer: asciiRenderer()})
}

var benchRuns = []struct {
	name     string
	interval time.Duration
	run      time.Duration
}{
	{"10min_2per_s", 500 * time.Millisecond, 10 * time.Minute},
	{"1h_50per_s", 20 * time.Millisecond, time.Hour},
}

// BenchmarkView is one frame at 160×48 with two sources after a run.
func BenchmarkView(b *testing.B) {
	for _, r := range benchRuns {
		b.Run(r.name, func(b *testing.B) {
			m := simulate(b, newBenchModel(r.run), 2, r.interval, r.run)
			m = update(b, m, tea.WindowSizeMsg{Width: 160, Height: 48})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = m.View()
			}
		})
	}
}

// BenchmarkHeapAfterFeeding reports the live heap once a run has been fed:
// flat between ten minutes and an hour means the rings bound it.
func BenchmarkHeapAfterFeeding(b *testing.B) {
	runs := append(benchRuns[:1:1],
		struct {
			name     string
			interval time.Duration
			run      time.Duration
		}{"10min_50per_s", 20 * time.Millisecond, 10 * time.Minute},
		benchRuns[1])
	for _, r := range runs {
		b.Run(r.name, func(b *testing.B) {
			var ms runtime.MemStats
			var before, after uint64
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before = ms.HeapInuse
				m := simulate(b, newBenchModel(r.run), 2, r.interval, r.run)
				runtime.GC()
				runtime.ReadMemStats(&ms)
				after = ms.HeapInuse
				runtime.KeepAlive(m)
			}
			b.ReportMetric(float64(after), "heap-inuse-B")
			b.ReportMetric(float64(int64(after)-int64(before)), "heap-growth-B")
		})
	}
}

// BenchmarkViewInFlight is one frame at 160×48 with 8 sources after an
// hour of samples (a pull every 500 ms per source), 200 pulls in flight
// (25 a source, sent over the last 12.5 s: a stall as the panels and
// charts draw it) and every engine's /metrics scraped.
func BenchmarkViewInFlight(b *testing.B) {
	const sources, run = 8, time.Hour
	m := simulate(b, newBenchModel(run), sources, 500*time.Millisecond, run)
	var evs []event.Event
	trial := int64(1 << 40)
	for k := range 25 {
		start := run - time.Duration(25-k)*500*time.Millisecond
		for i := range sources {
			trial++
			evs = append(evs, event.Event{Kind: event.KindPullStart, T: start, Wall: wallAt(start),
				Pulls: []event.PullStart{{Source: i, Trial: trial, Start: start}}})
		}
	}
	for i := range sources + 1 {
		name := "decoder"
		if i < sources {
			name = event.SourceName(i)
		}
		evs = append(evs, event.Event{Kind: event.KindMetrics, T: run, Wall: wallAt(run), Metrics: &event.MetricsInfo{Engine: name}})
	}
	m = update(b, m, eventsMsg{events: evs})
	m = update(b, m, tea.WindowSizeMsg{Width: 160, Height: 48})
	if n := m.st.inflight.Len(); n != 200 {
		b.Fatalf("%d pulls in flight, want 200", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = m.View()
	}
}
