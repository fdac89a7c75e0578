package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"p2pfault/cause"
	"p2pfault/event"
)

// TestWhyTableCountsEachWindowsPullsByCause: the faulted source's pulls
// sent in the window and after it are counted by their cause and timer
// (the samples' own), with their p50 and max; the other source's are not.
func TestWhyTableCountsEachWindowsPullsByCause(t *testing.T) {
	s := func(src int, start, lat float64, c event.Cause, tm *event.Timer) event.Sample {
		x := event.Sample{Source: src, Start: sec(start), Latency: sec(lat), Status: 200, Cause: c, Timer: tm}
		if c == event.CauseP2P {
			x.CachedTokens = 384
		}
		return x
	}
	hb := &event.Timer{Name: cause.TimerHeartbeat, Value: 10 * time.Second}
	hs := &event.Timer{Name: cause.TimerHandshake, Value: 30 * time.Second}
	load := &event.Timer{Name: cause.TimerLoad, Value: 30 * time.Second}
	b := event.Bounds{RecoveryWindow: 25 * time.Second, HealthyMax: 5 * time.Second, FaultedMax: 15 * time.Second}
	events := []event.Event{
		{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Mode: "pd", Case: "stall", Sources: 2, TimeScale: 1, Bounds: b, Timeline: "at 10s stall source-0 for 30s"}},
		{T: sec(10), Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: sec(10), Kind: "stall", Recovers: true}},
		{T: sec(40), Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: sec(10), End: sec(40), Kind: "stall", Recovers: true}},
		{T: sec(80), Kind: event.KindSamples, Samples: []event.Sample{
			s(0, 10.5, 11.5, event.CauseHeartbeat, hb),
			s(0, 11, 11, event.CauseHeartbeat, hb),
			s(0, 22, 30, event.CauseHandshake, hs),
			s(0, 30, 22, event.CauseHandshake, hs),
			s(0, 35, 17, event.CauseHandshake, hs),
			s(0, 45, 30.1, event.CauseLoadTimeout, load),
			s(0, 46, 0.02, event.CauseP2P, nil),
			s(0, 70, 0.02, event.CauseP2P, nil), // after the recovery window
			s(1, 20, 0.03, event.CauseP2P, nil), // the healthy source
		}},
		{T: sec(80), Kind: event.KindPhase, Phase: event.PhaseDone},
		{T: sec(81), Kind: event.KindEnd},
	}
	r, err := FromEvents(events)
	if err != nil {
		t.Fatal(err)
	}
	row := r.Row()
	want := []WhyRow{
		{Kind: "stall", StartS: 10, Sent: WhyIn, Cause: event.CauseHeartbeat, N: 2, P50: 11, Max: 11.5, Timer: cause.TimerHeartbeat, TimerS: 10},
		{Kind: "stall", StartS: 10, Sent: WhyIn, Cause: event.CauseHandshake, N: 3, P50: 22, Max: 30, Timer: cause.TimerHandshake, TimerS: 30},
		{Kind: "stall", StartS: 10, Sent: WhyAfter, Cause: event.CauseP2P, N: 1, P50: 0.02, Max: 0.02},
		{Kind: "stall", StartS: 10, Sent: WhyAfter, Cause: event.CauseLoadTimeout, N: 1, P50: 30.1, Max: 30.1, Timer: cause.TimerLoad, TimerS: 30},
	}
	if len(row.Why) != len(want) {
		t.Fatalf("%d why rows, want %d: %+v", len(row.Why), len(want), row.Why)
	}
	for i := range want {
		want[i].Label = want[i].Cause.Label()
		if row.Why[i] != want[i] {
			t.Errorf("why row %d:\n got %+v\nwant %+v", i, row.Why[i], want[i])
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, row); err != nil {
		t.Fatal(err)
	}
	if line := "| main | pd | stall | 1: stall source-0 at 10.0 s | in | waited on a new session until the handshake deadline | 3 | 22.00 s | 30.00 s | VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s |"; !strings.Contains(md.String(), line) {
		// One mode: no mode column.
		line = "| main | stall | 1: stall source-0 at 10.0 s | in | waited on a new session until the handshake deadline | 3 | 22.00 s | 30.00 s | VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s |"
		if !strings.Contains(md.String(), line) {
			t.Errorf("report.md lacks %q:\n%s", line, md.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, row); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows []struct {
			Why []WhyRow `json:"why"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != 1 || len(back.Rows[0].Why) != len(want) {
		t.Fatalf("report.json why: %v, %s", err, js.String())
	}
	if u, all := UnknownShare([]Row{row}); u != 0 || all != 7 {
		t.Errorf("unknown share %d of %d, want 0 of 7", u, all)
	}
}

// TestWhyTableIsAbsentForAStreamWithoutCauses: a stream written before
// causes has no why table (its report reads as it did).
func TestWhyTableIsAbsentForAStreamWithoutCauses(t *testing.T) {
	r := Run{Windows: []event.Window{{Source: 0, Start: sec(10), End: sec(40)}},
		Samples: []event.Sample{{Source: 0, Start: sec(12), Latency: sec(20), Status: 200}}}
	if rows := whyRows(r); rows != nil {
		t.Fatalf("why rows %+v for samples without causes, want none", rows)
	}
}

// TestChartPullsCarryTheirCause: report.html's data gives each pull its
// cause and timer (the tooltip lists them) and the row the labels of the
// causes its latency chart is coloured by; a stream without causes has none.
func TestChartPullsCarryTheirCause(t *testing.T) {
	hs := &event.Timer{Name: cause.TimerHandshake, Value: 30 * time.Second}
	r := Run{Info: event.RunInfo{Arm: "main", Case: "stall"}, Samples: []event.Sample{
		{Source: 0, Start: sec(22), Latency: sec(30), Status: 200, Cause: event.CauseHandshake, Timer: hs},
		{Source: 0, Start: sec(23), Latency: sec(0.02), Status: 200, CachedTokens: 384, Cause: event.CauseP2P},
	}}
	c := chartData("r0", r)
	if len(c.Pulls) != 2 || c.Pulls[0].Cause != event.CauseHandshake || c.Pulls[0].Timer != "VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s" || c.Pulls[1].Timer != "" {
		t.Fatalf("chart pulls %+v", c.Pulls)
	}
	if c.CauseLabels[event.CauseHandshake] != event.CauseHandshake.Label() || len(c.CauseLabels) != 2 {
		t.Errorf("cause labels %v", c.CauseLabels)
	}
	r.Samples[0].Cause, r.Samples[0].Timer, r.Samples[1].Cause = "", nil, ""
	if c := chartData("r0", r); c.CauseLabels != nil {
		t.Errorf("cause labels %v for a stream without causes", c.CauseLabels)
	}
}
