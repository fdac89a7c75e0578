package ui

import (
	"slices"
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
