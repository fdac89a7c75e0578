package ui

import (
	"slices"
	"strings"
	"testing"

	"p2pfault/event"
)

// TestLookupColumnShowsOnceAnEngineExportsTheDelay: the process table has
// no lookup column while no engine exports vLLM's async lookup delay, and
// then one, the decoder's p50 and highest bucket over the rate window.
func TestLookupColumnShowsOnceAnEngineExportsTheDelay(t *testing.T) {
	engines := []*engineState{{info: event.EngineInfo{Name: "source-0"}}, {info: event.EngineInfo{Name: "decoder"}}}
	plain := map[string]event.MetricsInfo{"source-0": {Engine: "source-0"}, "decoder": {Engine: "decoder"}}
	rows := procTable{engines: engines, metrics: plain}.rows()
	if slices.Contains(rows[0], lookupHead) {
		t.Fatalf("head %v has the lookup column, but no engine exports the delay", rows[0])
	}
	busy := map[string]event.MetricsInfo{"source-0": {Engine: "source-0"}, "decoder": {Engine: "decoder", Live: event.Live{
		LookupAsync: event.Delay{Exported: true, N: 20, P50: event.MetricOf(2.4), Max: event.MetricOf(10), Over: true, Mean: event.MetricOf(3)}}}}
	rows = procTable{engines: engines, metrics: busy}.rows()
	col := slices.Index(rows[0], lookupHead)
	if col < 0 {
		t.Fatalf("head %v: no lookup column", rows[0])
	}
	if got := rows[1][col]; got != "–" {
		t.Errorf("source-0's lookup cell %q, want – (it does not export it)", got)
	}
	if got := rows[2][col]; got != "2.4s/>10.0s" {
		t.Errorf("decoder's lookup cell %q, want 2.4s/>10.0s", got)
	}
	quiet := event.MetricsInfo{Live: event.Live{LookupAsync: event.Delay{Exported: true}}}
	if got := lookupCell(quiet, true); got != "none" {
		t.Errorf("no lookup in the window: %q, want none", got)
	}
}

// TestProcTableKeepsTheLiveFiguresOnNarrowScreens: at 120 and 80 columns
// the process table of a busy run is wider than the screen; the columns
// that say least of the run as it goes (SID, MEMBERS, UPTIME, ...) give
// way, so RUN, WAIT and the decoder's lookup delay stay whole on it (they
// were clipped at the right edge). Wide enough, every column shows.
func TestProcTableKeepsTheLiveFiguresOnNarrowScreens(t *testing.T) {
	engines := []*engineState{
		{info: event.EngineInfo{Name: "source-0", Role: "source", Pid: 6869, Sid: 6869, Members: []int{6869, 6901, 6902}, State: event.StateReady, HTTPPort: 16443, P2PPort: 24300}},
		{info: event.EngineInfo{Name: "decoder", Role: "decoder", Pid: 6868, Sid: 6868, Members: []int{6868, 6900}, State: event.StateReady, HTTPPort: 24536, P2PPort: 27394}},
	}
	metrics := map[string]event.MetricsInfo{
		"source-0": {Engine: "source-0", Live: event.Live{Running: event.MetricOf(6), Waiting: event.MetricOf(7), LookupAsync: event.Delay{Exported: true}}},
		"decoder": {Engine: "decoder", Live: event.Live{Running: event.MetricOf(1), Waiting: event.MetricOf(0), LookupAsync: event.Delay{
			Exported: true, N: 40, P50: event.MetricOf(0.015), Max: event.MetricOf(0.1)}}},
	}
	st := NewStyles(asciiRenderer())
	for _, w := range []int{120, 80} {
		out := procTable{engines: engines, metrics: metrics, styles: &st}.Render(w, 3)
		lines := strings.Split(out, "\n")
		for _, want := range []string{"RUN", "WAIT", lookupHead} {
			if !strings.Contains(lines[0], want) {
				t.Errorf("%d columns: head %q lacks %s", w, lines[0], want)
			}
		}
		if f := strings.Fields(lines[2]); f[len(f)-1] != "15ms/≤100ms" {
			t.Errorf("%d columns: the decoder's row %q should end with its lookup delay 15ms/≤100ms", w, lines[2])
		}
		if !strings.Contains(lines[1], "6    7") {
			t.Errorf("%d columns: source-0's row %q should show running 6, waiting 7", w, lines[1])
		}
		if strings.Contains(out, "…") {
			t.Errorf("%d columns: a column is clipped:\n%s", w, out)
		}
	}
	wide := procTable{engines: engines, metrics: metrics, styles: &st}.Render(200, 3)
	for _, want := range []string{"SID", "MEMBERS", "UPTIME", "6869,6901,6902"} {
		if !strings.Contains(wide, want) {
			t.Errorf("200 columns should show every column, %s too:\n%s", want, wide)
		}
	}
}
