package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestProcTableSaysWhichRanksAreStopped: while one data-parallel rank's
// core is stopped (stall source-0/rank1) the engine's STATE reads "rank1
// stopped", in the stall's colours, not "stopped", which the whole engine
// stopped still reads; the one-line table and the event log say the same,
// and on narrow screens the live figures stay whole beside it.
func TestProcTableSaysWhichRanksAreStopped(t *testing.T) {
	rank1 := event.EngineInfo{Name: "source-0", Role: "source", Pid: 6869, Sid: 6869, Members: []int{6869, 6901, 6902},
		State: event.StateReady, StoppedRanks: []int{1}, HTTPPort: 16443, P2PPort: 24300}
	whole := rank1
	whole.State, whole.StoppedRanks = event.StateStopped, nil
	decoder := event.EngineInfo{Name: "decoder", Role: "decoder", Pid: 6868, Sid: 6868, Members: []int{6868, 6900},
		State: event.StateReady, HTTPPort: 24536, P2PPort: 27394}
	metrics := map[string]event.MetricsInfo{
		"source-0": {Engine: "source-0", Live: event.Live{Running: event.MetricOf(6), Waiting: event.MetricOf(7), LookupAsync: event.Delay{Exported: true}}},
		"decoder": {Engine: "decoder", Live: event.Live{Running: event.MetricOf(1), Waiting: event.MetricOf(0), LookupAsync: event.Delay{
			Exported: true, N: 40, P50: event.MetricOf(0.015), Max: event.MetricOf(0.1)}}},
	}
	st := NewStyles(asciiRenderer())
	for _, tt := range []struct {
		src       event.EngineInfo
		want, not string
	}{
		{rank1, "rank1 stopped", "ready"},
		{whole, "stopped", "rank1"},
	} {
		engines := []*engineState{{info: tt.src}, {info: decoder}}
		for _, w := range []int{200, 120, 80} {
			out := procTable{engines: engines, metrics: metrics, styles: &st}.Render(w, 3)
			lines := strings.Split(out, "\n")
			row := lines[1]
			if !strings.Contains(row, "  "+tt.want+"  ") || strings.Contains(row, tt.not) {
				t.Errorf("%d columns, %s: source-0's row %q should read STATE %q", w, tt.src.StateText(), row, tt.want)
			}
			if f := strings.Fields(lines[2]); f[len(f)-1] != "15ms/≤100ms" || strings.Contains(out, "…") {
				t.Errorf("%d columns, %s: a live figure is clipped:\n%s", w, tt.want, out)
			}
		}
		if got := engineBadge(tt.src); got != badgeStalled {
			t.Errorf("%s: badge %v, want the stall's", tt.want, got)
		}
		if line := procLine(engines, &st, 200); !strings.Contains(line, "source-0 "+tt.want+" 6869") {
			t.Errorf("the one-line table %q lacks source-0 %s", line, tt.want)
		}
	}

	// The log says each change of the words: the rank stopped, then ready
	// again, though State stayed ready throughout.
	s := newState(100, 100)
	ready := rank1
	ready.StoppedRanks = nil
	for i, in := range []event.EngineInfo{ready, rank1, ready} {
		s.apply(event.Event{Kind: event.KindEngine, T: time.Duration(i) * time.Second, Engine: &in}, time.Minute)
	}
	var log []string
	for _, e := range s.log.Last(s.log.Len()) {
		log = append(log, e.text)
	}
	got := strings.Join(log, "\n")
	for _, want := range []string{"source-0 rank1 stopped (pid 6869)", "source-0 ready (pid 6869, :16443)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the event log lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "source-0 ready") != 2 {
		t.Errorf("the event log should say source-0 ready twice (at the start, after the rank's resume):\n%s", got)
	}
}
