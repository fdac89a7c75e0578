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

// TestWhyTableBreaksARankedSourceDownByRank: on a source of two
// data-parallel ranks the why table counts each rank's pulls apart
// (#56828: one fault, rank 0's session reset at once, rank 1's loads ran
// to the load timeout and the abort-ack), with a rank column in the text,
// report.md and report.json; the source of one rank beside it gets none.
func TestWhyTableBreaksARankedSourceDownByRank(t *testing.T) {
	hs := &event.Timer{Name: cause.TimerHandshake, Value: 30 * time.Second}
	ack := &event.Timer{Name: cause.TimerAbortAck, Value: 40 * time.Second}
	s := func(src, rank int, start, lat float64, c event.Cause, tm *event.Timer) event.Sample {
		return event.Sample{Source: src, Rank: rank, Start: sec(start), Latency: sec(lat), Status: 200, Cause: c, Timer: tm}
	}
	b := event.Bounds{RecoveryWindow: 25 * time.Second, HealthyMax: 5 * time.Second, FaultedMax: 15 * time.Second}
	events := []event.Event{
		{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Mode: "pd", Case: "gone", Sources: 2, SourceRanks: []int{2, 1},
			TimeScale: 1, Bounds: b, Timeline: "at 10s gone source-0"}},
		{T: sec(10), Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: sec(10), Kind: "gone"}},
		{T: sec(60), Kind: event.KindSamples, Samples: []event.Sample{
			s(0, 0, 10.2, 0.03, event.CausePeerDown, nil),
			s(0, 0, 10.4, 0.05, event.CausePeerDown, nil),
			s(0, 0, 12, 29, event.CauseHandshake, hs),
			s(0, 1, 10.6, 40.03, event.CauseAbortAck, ack),
			s(0, 1, 11.5, 40.04, event.CauseAbortAck, ack),
			s(0, 1, 12.5, 40.2, event.CauseAbortAck, ack),
			s(0, 1, 23, 30.1, event.CauseHandshake, hs),
			s(0, 1, 9.5, 0.04, event.CauseP2P, nil), // before the window
			s(1, 0, 20, 0.03, event.CauseP2P, nil),  // the healthy source
		}},
		{T: sec(60), Kind: event.KindPhase, Phase: event.PhaseDone},
		{T: sec(61), Kind: event.KindEnd},
	}
	r, err := FromEvents(events)
	if err != nil {
		t.Fatal(err)
	}
	row := r.Row()
	type line struct {
		rank  int
		cause event.Cause
		n     int
		p50   float64
		max   float64
	}
	// By rank, then in the causes' order (event.Causes).
	want := []line{
		{0, event.CauseHandshake, 1, 29, 29},
		{0, event.CausePeerDown, 2, 0.03, 0.05},
		{1, event.CauseHandshake, 1, 30.1, 30.1},
		{1, event.CauseAbortAck, 3, 40.04, 40.2},
	}
	if len(row.Why) != len(want) {
		t.Fatalf("%d why rows, want %d: %+v", len(row.Why), len(want), row.Why)
	}
	for i, w := range want {
		g := row.Why[i]
		if g.Rank == nil || *g.Rank != w.rank || g.Cause != w.cause || g.N != w.n || g.P50 != w.p50 || g.Max != w.max || g.Sent != WhyIn {
			t.Errorf("why row %d: %+v (rank %v), want rank %d %s n=%d p50 %v max %v", i, g, g.Rank, w.rank, w.cause, w.n, w.p50, w.max)
		}
	}
	text := WhyTable([]Row{row})
	for _, l := range []string{
		"arm   case  window                      sent  rank            cause",
		"main  gone  1: gone source-0 at 10.0 s  in    source-0/rank0  session reaped: peer down                             2      30.0 ms  50.0 ms  –",
		"main  gone  1: gone source-0 at 10.0 s  in    source-0/rank1  waited the load timeout and the abort-ack timeout     3      40.04 s  40.20 s  _LOAD_TIMEOUT_S + _ABORT_ACK_TIMEOUT_S 40 s",
	} {
		if !strings.Contains(text, l) {
			t.Errorf("why table lacks %q:\n%s", l, text)
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, row); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{whyRankCaption, "| main | gone | 1: gone source-0 at 10.0 s | in | source-0/rank1 | waited on a new session until the handshake deadline | 1 | 30.10 s | 30.10 s | VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s |"} {
		if !strings.Contains(md.String(), l) {
			t.Errorf("report.md lacks %q:\n%s", l, md.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, row); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows []struct {
			Why []map[string]any `json:"why"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != 1 || len(back.Rows[0].Why) != len(want) {
		t.Fatalf("report.json why: %v, %s", err, js.String())
	}
	for i, w := range back.Rows[0].Why {
		if rk, ok := w["rank"].(float64); !ok || int(rk) != want[i].rank {
			t.Errorf("report.json why[%d] rank %v, want %d (rank 0 written too)", i, w["rank"], want[i].rank)
		}
	}
}

// TestWhyTableOfASourceOfOneRankHasNoRankColumn: without data-parallel
// sources the why rows carry no rank and the table no rank column, in
// text, report.md and report.json alike (such a run prints what it did
// before ranks).
func TestWhyTableOfASourceOfOneRankHasNoRankColumn(t *testing.T) {
	r := Run{Info: event.RunInfo{Arm: "main", Case: "stall", Sources: 1},
		Windows: []event.Window{{Source: 0, Start: sec(10), End: sec(40), Kind: "stall"}},
		Samples: []event.Sample{{Source: 0, Start: sec(12), Latency: sec(20), Status: 200, Cause: event.CauseHeartbeat}}}
	rows := whyRows(r)
	if len(rows) != 1 || rows[0].Rank != nil {
		t.Fatalf("why rows %+v, want one without a rank", rows)
	}
	row := Row{Arm: "main", Case: "stall", Why: rows}
	if h := strings.Join(whyHeader([]Row{row}), " "); strings.Contains(h, "rank") {
		t.Errorf("why header %q has a rank column", h)
	}
	js, err := json.Marshal(rows[0])
	if err != nil || strings.Contains(string(js), `"rank"`) {
		t.Errorf("why row JSON %s (%v) names a rank", js, err)
	}
}

// TestWhyTableCountsThePullsCaughtInFlight: a pull sent before a window
// and still in flight when its fault fired is the window's "before" line
// (#56828's loads caught mid-transfer), listed first; one that ended by
// the fault's instant is not, nor one sent while an earlier window on the
// same source was in force (that window's), nor the other source's.
func TestWhyTableCountsThePullsCaughtInFlight(t *testing.T) {
	s := func(src int, start, lat float64, c event.Cause, tm *event.Timer) event.Sample {
		return event.Sample{Source: src, Start: sec(start), Latency: sec(lat), Status: 200, Cause: c, Timer: tm}
	}
	hb := &event.Timer{Name: cause.TimerHeartbeat, Value: 10 * time.Second}
	ack := &event.Timer{Name: cause.TimerAbortAck, Value: 40 * time.Second}
	b := event.Bounds{RecoveryWindow: 25 * time.Second, HealthyMax: 5 * time.Second, FaultedMax: 15 * time.Second}
	events := []event.Event{
		{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Mode: "pd", Case: "none", Sources: 2, TimeScale: 1, Bounds: b}},
		{T: sec(10), Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: sec(10), Kind: "stall", Recovers: true}},
		{T: sec(20), Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: sec(10), End: sec(20), Kind: "stall", Recovers: true}},
		{T: sec(50), Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: sec(50), Kind: "gone"}},
		{T: sec(95), Kind: event.KindSamples, Samples: []event.Sample{
			s(0, 8, 0.04, event.CauseP2P, nil),           // ended long before the stall
			s(0, 9.96, 0.04, event.CauseP2P, nil),        // ended at its instant: not caught
			s(0, 9.5, 11.5, event.CauseHeartbeat, hb),    // caught by the stall
			s(0, 15, 40, event.CauseAbortAck, ack),       // sent in the stall, in flight at 50 s: the stall's
			s(0, 48, 40.03, event.CauseAbortAck, ack),    // caught by gone
			s(0, 49.98, 0.065, event.CausePeerDown, nil), // caught by gone
			s(1, 9.5, 20, event.CauseHeartbeat, hb),      // the other source
		}},
		{T: sec(95), Kind: event.KindPhase, Phase: event.PhaseDone},
		{T: sec(96), Kind: event.KindEnd},
	}
	r, err := FromEvents(events)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		window int
		sent   string
		cause  event.Cause
		n      int
		max    float64
	}
	var got []line
	for _, w := range r.Row().Why {
		got = append(got, line{w.Window, w.Sent, w.Cause, w.N, w.Max})
	}
	want := []line{
		{0, WhyBefore, event.CauseHeartbeat, 1, 11.5},
		{0, WhyIn, event.CauseAbortAck, 1, 40},
		{1, WhyBefore, event.CausePeerDown, 1, 0.065},
		{1, WhyBefore, event.CauseAbortAck, 1, 40.03},
	}
	if len(got) != len(want) {
		t.Fatalf("why lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("why line %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if tab := WhyTable([]Row{r.Row()}); !strings.Contains(tab, "before") {
		t.Errorf("the why table does not say before:\n%s", tab)
	}
}

// UnknownShare is, over rows, how many faulted pulls (in a window or after
// it) the why tables attribute to unknown, of how many.
func UnknownShare(rows []Row) (unknown, all int) {
	for _, r := range rows {
		for _, w := range r.Why {
			all += w.N
			if w.Cause == event.CauseUnknown {
				unknown += w.N
			}
		}
	}
	return unknown, all
}
