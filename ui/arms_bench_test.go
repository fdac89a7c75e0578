package ui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
)

// simulateArm feeds m one arm of a run (as simulate does for a one-arm
// run: samples in 100 ms batches, pulls started, engine states and a live
// verdict every second), every event stamped with arm.
func simulateArm(tb testing.TB, m Model, arm string, sources int, interval, run time.Duration) Model {
	tb.Helper()
	stamp := func(evs []event.Event) []event.Event {
		for i := range evs {
			evs[i].Arm = arm
		}
		return evs
	}
	var s script
	info := runInfo("none", sources, 1)
	info.Arm = arm
	s.run(info)
	s.upCluster(sources)
	m = update(tb, m, eventsMsg{events: stamp(s.events)})

	const frame = 100 * time.Millisecond
	var trial int64
	next := time.Duration(0)
	verdict := liveVerdict(true)
	for t := time.Duration(0); t < run; t += frame {
		var samples []event.Sample
		var started []event.PullStart
		for ; next < t+frame; next += interval {
			for i := 0; i < sources; i++ {
				trial++
				started = append(started, event.PullStart{Source: i, Trial: trial, Start: next})
				samples = append(samples, event.Sample{
					Source: i, Trial: trial, Start: next, Latency: time.Duration(10+trial%25) * time.Millisecond,
					Status: 200, PromptTokens: 300, CachedTokens: 256,
				})
			}
		}
		batch := []event.Event{
			{Kind: event.KindPullStart, T: t, Wall: wallAt(t), Pulls: started},
			{Kind: event.KindSamples, T: t, Wall: wallAt(t), Samples: samples},
		}
		if t%time.Second == 0 {
			for i := 0; i < sources; i++ {
				batch = append(batch, event.Event{Kind: event.KindEngine, T: t, Wall: wallAt(t),
					Engine: engineInfo(event.SourceName(i), i, event.StateReady, 4200+10*i, warmup+t)})
			}
			batch = append(batch, event.Event{Kind: event.KindVerdict, T: t, Wall: wallAt(t), Verdict: &verdict})
		}
		m = update(tb, m, eventsMsg{events: stamp(batch)})
	}
	return m
}

// BenchmarkViewArms is one frame at 160×48 of two arms × two sources after
// an hour of pulls (2 a second per source), side by side.
func BenchmarkViewArms(b *testing.B) {
	run := time.Hour
	m := newBenchModel(run)
	for _, arm := range []string{"main", "fixed"} {
		m = simulateArm(b, m, arm, 2, 500*time.Millisecond, run)
	}
	m = update(b, m, tea.WindowSizeMsg{Width: 160, Height: 48})
	if !m.arms.multi() {
		b.Fatal("the model did not see two arms")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = m.View()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/frame")
}
