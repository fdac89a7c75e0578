package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/report"
)

// longRun is a run of length d with the mix of events a real run writes
// (`p2pfault run --case stall` at real time wrote 923 events in 66 s: per
// second 4 pull_start, 3 samples, 3 engine, 3 metrics and about one live
// verdict), and a 30 s stall every ten minutes with its window.
func longRun(d time.Duration) []event.Event {
	var s script
	s.run(runInfo("none", 2, 1))
	s.upCluster(2)
	verdict := liveVerdict(true)
	var trial int64
	for t := time.Duration(0); t < d; t += 500 * time.Millisecond {
		for i := 0; i < 2; i++ {
			trial++
			s.add(t, event.Event{Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: i, Trial: trial, Start: t}}})
		}
		end := t + 30*time.Millisecond
		s.add(end, event.Event{Kind: event.KindSamples, Samples: []event.Sample{
			{Source: 0, Trial: trial - 1, SeedStatus: 200, SeedLatency: 5 * time.Millisecond, Start: t, Latency: 30 * time.Millisecond, Status: 200, PromptTokens: 400, CachedTokens: 384},
			{Source: 1, Trial: trial, SeedStatus: 200, SeedLatency: 5 * time.Millisecond, Start: t, Latency: 30 * time.Millisecond, Status: 200, PromptTokens: 400, CachedTokens: 384},
		}})
		if t%time.Second != 0 {
			continue
		}
		for i, name := range []string{"source-0", "source-1", "decoder"} {
			s.engine(t, engineInfo(name, min(i, 1), event.StateReady, 4200+10*i, warmup+t))
			s.add(t, event.Event{Kind: event.KindMetrics, Metrics: &event.MetricsInfo{Engine: name,
				Reading: event.Reading{Running: event.MetricOf(1), ExtHits: event.MetricOf(float64(trial)), ExtQueries: event.MetricOf(float64(trial))}}})
		}
		s.verdict(t, verdict, false)
		switch t % (10 * time.Minute) {
		case time.Minute:
			s.fault(t, fault.ActionStall, 0, 30*time.Second)
			s.cond(t, event.ConditionInfo{Source: 0, Condition: event.CondStalled, Fault: fault.ActionStall, Label: "STALLED", Until: t + 30*time.Second})
			s.window(t, event.Window{Source: 0, Start: t, Recovers: true})
		case time.Minute + 30*time.Second:
			s.fault(t, fault.ActionResume, 0, 0)
			s.cond(t, event.ConditionInfo{Source: 0, Condition: event.CondUp, Label: "READY"})
			s.window(t, event.Window{Source: 0, Start: t - 30*time.Second, End: t, Recovers: true})
		}
	}
	return s.events
}

var replayBenchRuns = []struct {
	name string
	d    time.Duration
}{{"10min", 10 * time.Minute}, {"1h", time.Hour}, {"6h", 6 * time.Hour}}

// BenchmarkReplaySeekBack is the cost of a step back at the end of a long
// run: the Model is rebuilt from the first event (a step forward folds in
// only the events of that step). Reports the events and the milliseconds a
// rebuild takes.
func BenchmarkReplaySeekBack(b *testing.B) {
	for _, rb := range replayBenchRuns {
		b.Run(rb.name, func(b *testing.B) {
			evs := longRun(rb.d)
			r := NewReplay(ReplayConfig{Events: evs}, Options{Renderer: asciiRenderer()})
			r.Update(tea.WindowSizeMsg{Width: 140, Height: 45})
			end := r.end()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r.seek(end)
				r.seek(end.Add(-time.Second)) // back: rebuilds
			}
			b.ReportMetric(float64(len(evs)), "events")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/rebuild")
			_ = r.View()
		})
	}
}

// BenchmarkReplayLoad is the cost of reading a long run's events file
// with report's reader and of holding its events: the file's size and the
// heap the events take.
func BenchmarkReplayLoad(b *testing.B) {
	for _, rb := range replayBenchRuns {
		b.Run(rb.name, func(b *testing.B) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			for _, ev := range longRun(rb.d) {
				if err := enc.Encode(ev); err != nil {
					b.Fatal(err)
				}
			}
			data := buf.Bytes()
			var heap uint64
			b.ResetTimer()
			for b.Loop() {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				evs, _, err := report.ReadEvents(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.StartTimer()
				heap = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(evs)
			}
			b.ReportMetric(float64(len(data))/1e6, "file_MB")
			b.ReportMetric(float64(heap)/1e6, "heap_MB")
		})
	}
}

func ExampleReplay_tag() {
	r := NewReplay(ReplayConfig{Events: stallRun()}, Options{Renderer: asciiRenderer()})
	r.Update(tea.WindowSizeMsg{Width: 140, Height: 45})
	r.press("]", "]", "f")
	fmt.Println(r.tag())
	// Output: REPLAY ×4 ▶ 00:30/01:25
}
