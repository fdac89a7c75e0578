package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
)

// spansOf is source i's chart windows (start, end, open, recovers).
func spansOf(m Model, i int) []span {
	var out []span
	sp := &m.st.sources[i].spans
	for j := 0; j < sp.Len(); j++ {
		out = append(out, sp.At(j))
	}
	return out
}

// The chart's fault windows open and close by the window events alone, at
// the window's own start and end: a fault event (its action in the log)
// draws none, whatever its kind, and a window without a fault event is
// drawn all the same.
func TestChartWindowsComeFromWindowEventsOnly(t *testing.T) {
	// The stall took effect (its stop) before the fault event was sent.
	stallAt, stoppedAt, resumedAt := 9*time.Second, 8800*time.Millisecond, 15*time.Second
	stall := event.Event{Kind: event.KindFault, Fault: &event.FaultInfo{Action: fault.ActionStall, Source: 0, Duration: 30 * time.Second, By: "key"}}
	resume := event.Event{Kind: event.KindFault, Fault: &event.FaultInfo{Action: fault.ActionResume, Source: 0, By: "key"}}
	opened := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: stoppedAt, Recovers: true}}
	closed := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: stoppedAt, End: resumedAt, Recovers: true}}
	tests := []struct {
		name string
		sc   func() scene
		want []span
	}{
		{"a fault event alone opens nothing", func() scene { return withEvents(sceneSteady(), stallAt, stall) }, nil},
		{"a fault and its resume alone draw nothing", func() scene {
			return withEvents(withEvents(sceneSteady(), stallAt, stall), resumedAt, resume)
		}, nil},
		{"the window opens at its own start, not the fault event's time", func() scene {
			return withEvents(sceneSteady(), stallAt, stall, opened)
		}, []span{{start: stoppedAt, open: true, recovers: true}}},
		{"the window event sent again keeps one window", func() scene {
			return withEvents(sceneSteady(), stallAt, stall, opened, opened)
		}, []span{{start: stoppedAt, open: true, recovers: true}}},
		{"the closing window event closes it", func() scene {
			return withEvents(withEvents(sceneSteady(), stallAt, stall, opened), resumedAt, resume, closed)
		}, []span{{start: stoppedAt, end: resumedAt, recovers: true}}},
		{"a window only seen closed is drawn", func() scene { return withEvents(sceneSteady(), resumedAt, closed) },
			[]span{{start: stoppedAt, end: resumedAt, recovers: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := feed(t, tt.sc(), 160, 48)
			got := spansOf(m, 0)
			if len(got) != len(tt.want) {
				t.Fatalf("windows on source-0's chart = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("window %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			marked := strings.ContainsRune(m.View(), markRune)
			if marked != (len(tt.want) > 0) {
				t.Errorf("fault window marked on the chart: %v, want %v:\n%s", marked, len(tt.want) > 0, m.View())
			}
			if len(spansOf(m, 1)) != 0 {
				t.Errorf("source-1 has windows: %+v", spansOf(m, 1))
			}
		})
	}
}

// The replay's f stops where window events open a window: a fault event
// without one is no stop.
func TestReplayStopsOnlyAtWindowEvents(t *testing.T) {
	s := stalledAt10s() // a stall's fault event and its window at 10 s
	s.samples(2, 10*time.Second, 20*time.Second, 500*time.Millisecond, healthy)
	s.fault(20*time.Second, fault.ActionStall, 1, 5*time.Second) // no window event
	s.samples(2, 20*time.Second, 30*time.Second, 500*time.Millisecond, healthy)
	r := fromFile(t, writeEvents(t, s.events), 160, 48)
	if len(r.marks) != 1 || !r.marks[0].Equal(wallAt(10*time.Second)) {
		t.Fatalf("replay stops = %v, want the window's at %v only", r.marks, wallAt(10*time.Second))
	}
}
