package exporter

import (
	"testing"
	"time"

	"p2pfault/event"
)

// TestABusyLoadIsCountedOnceFromItsReports: a load's reports carry its
// counts so far; the counters add what each report adds, so a reader's
// rate() sees the load as it ran, and the final report's cancelled.
func TestABusyLoadIsCountedOnceFromItsReports(t *testing.T) {
	x := newAt(func() time.Time { return wall0 })
	s := x.Stream()
	s.Feed(event.Event{Kind: event.KindRun, Arm: "main", Run: &event.RunInfo{Arm: "main", Case: "none", Engine: "sim", TimeScale: 1, Sources: 2}})
	load := func(final bool, c event.LoadCounts) {
		l := event.LoadInfo{Kind: "busy", Source: 0, Concurrency: 16, PromptTokens: 511, Start: 10 * time.Second, Final: final, LoadCounts: c}
		s.Feed(event.Event{Kind: event.KindLoad, Arm: "main", T: 11 * time.Second, Wall: wall0, Load: &l})
	}
	load(false, event.LoadCounts{Sent: 40, Answered: 24, InFlight: 16})
	load(false, event.LoadCounts{Sent: 100, Answered: 84, InFlight: 16})
	load(true, event.LoadCounts{Sent: 120, Answered: 100, Failed: 4, Cancelled: 16})
	lb := map[string]string{"arm": "main", "case": "none", "kind": "busy", "source": "source-0"}
	want(t, x, "p2pfault_load_requests_sent_total", lb, 120)
	for outcome, n := range map[string]float64{"answered": 100, "failed": 4, "cancelled": 16} {
		l := map[string]string{"outcome": outcome}
		for k, v := range lb {
			l[k] = v
		}
		want(t, x, "p2pfault_load_requests_ended_total", l, n)
	}
}
