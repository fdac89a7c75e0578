package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

func sample(src int, start, lat time.Duration, cached int) event.Sample {
	return event.Sample{Source: src, Start: start, Latency: lat, Status: 200, CachedTokens: cached}
}

// TestPrinterSummarisesEachSecondAndPrintsChangesOnce: one summary line per
// second of finished pulls, per source; an engine state printed only when
// it changes; faults, windows and warnings as they come.
func TestPrinterSummarisesEachSecondAndPrintsChangesOnce(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "main/stall ")
	ready := &event.EngineInfo{Name: "source-0", State: event.StateReady, Pid: 10, Sid: 10, HTTPPort: 8100, P2PPort: 7777}
	events := []event.Event{
		{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "stall", Engine: "sim", Sources: 2, TimeScale: 1, Interval: 500 * time.Millisecond}},
		{Kind: event.KindEngine, Engine: ready},
		{Kind: event.KindEngine, Engine: ready},
		{Kind: event.KindSamples, Samples: []event.Sample{
			sample(0, 100*time.Millisecond, 30*time.Millisecond, 384),
			sample(1, 300*time.Millisecond, 40*time.Millisecond, 384),
			sample(0, 600*time.Millisecond, 20*time.Millisecond, 0),
		}},
		{T: 10 * time.Second, Kind: event.KindFault, Fault: &event.FaultInfo{Action: "stall", Source: 0, Duration: 30 * time.Second, By: "script"}},
		{T: 10 * time.Second, Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 10 * time.Second}},
		{Kind: event.KindSamples, Samples: []event.Sample{sample(1, 11*time.Second, 30*time.Millisecond, 384)}},
		{T: 12 * time.Second, Kind: event.KindWarning, Message: "in-flight cap hit"},
		{T: 13 * time.Second, Kind: event.KindEnd, Message: "run complete"},
	}
	for _, ev := range events {
		p.Print(ev)
	}
	got := out.String()
	for _, want := range []string{
		"main/stall [   0.00s] run: arm main, case stall, engine sim, 2 sources",
		"source-0 ready (pid 10, sid 10, http :8100, p2p :7777)",
		"[   1.00s] source-0 n=2 hit=1 p50=0.02s max=0.03s | source-1 n=1 hit=1 p50=0.04s max=0.04s",
		"[  10.00s] fault: stall source-0 for 30.00s (script)",
		"fault window on source-0 opened",
		"warning: in-flight cap hit",
		"[  12.00s] source-1 n=1 hit=1",
		"end: run complete",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "source-0 ready"); n != 1 {
		t.Errorf("source-0 ready printed %d times, want once:\n%s", n, got)
	}
}

func TestPrinterWithoutSummariesPrintsNoPullLines(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	p.Summaries = false
	p.Print(event.Event{Kind: event.KindSamples, Samples: []event.Sample{sample(0, 0, time.Millisecond, 1)}})
	p.Print(event.Event{Kind: event.KindEnd})
	if strings.Contains(out.String(), "n=") {
		t.Fatalf("summary printed with Summaries off:\n%s", out.String())
	}
}

// A fault's verification is one line, saying whether it took effect and
// what was seen; pull starts and scrapes print nothing.
func TestPrinterPrintsVerifications(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	p.Print(event.Event{T: 10 * time.Second, Kind: event.KindVerification, Verification: &event.Verification{
		Action: "stall", Source: 0, Verified: true, After: 4 * time.Millisecond, Detail: "2 of 2 processes of session 42 in state T"}})
	p.Print(event.Event{T: 11 * time.Second, Kind: event.KindVerification, Verification: &event.Verification{
		Action: "remove", Source: 1, After: 2 * time.Second, Detail: "127.0.0.1:1 accepts connections"}})
	p.Print(event.Event{T: 11 * time.Second, Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: 0, Trial: 1}}})
	p.Print(event.Event{T: 11 * time.Second, Kind: event.KindMetrics, Metrics: &event.MetricsInfo{Engine: "decoder"}})
	got := out.String()
	for _, want := range []string{
		"verified: stall source-0 took effect after 0.00s: 2 of 2 processes of session 42 in state T",
		"verified: remove source-1 did NOT take effect after 2.00s: 127.0.0.1:1 accepts connections",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 2 {
		t.Errorf("%d lines, want 2:\n%s", n, got)
	}
}

// TestPrinterTellsWrongTexts: a pull whose text is not its source's is a
// line of its own (the first ten; then one line saying more came) and a
// wrong=N in its second's summary; with the content check off nothing is
// said of texts.
func TestPrinterTellsWrongTexts(t *testing.T) {
	wrong := func(start time.Duration) event.Sample {
		s := sample(0, start, 20*time.Millisecond, 384)
		s.Content, s.SourceText, s.PullText = event.ContentDiffers, " the of and", " is that for"
		return s
	}
	right := sample(1, 200*time.Millisecond, 20*time.Millisecond, 384)
	right.Content = event.ContentSame
	var batch []event.Sample
	for i := range 12 {
		batch = append(batch, wrong(time.Duration(i)*50*time.Millisecond))
	}
	run := func(tokens int) string {
		var out bytes.Buffer
		p := New(&out, "")
		p.Print(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "kill", Sources: 2, TimeScale: 1, ContentTokens: tokens, ContentMatch: "exact"}})
		p.Print(event.Event{T: time.Second, Kind: event.KindSamples, Samples: append([]event.Sample{right}, batch...)})
		p.Print(event.Event{T: 2 * time.Second, Kind: event.KindEnd, Message: "run complete"})
		return out.String()
	}
	got := run(8)
	first := `[   1.00s] content: pull of source-0 sent at 0.00s (trial 0, cached 384) returned " is that for", the source's completion is " the of and"`
	if !strings.Contains(got, first) {
		t.Errorf("no line for the first wrong pull (%s):\n%s", first, got)
	}
	if n := strings.Count(got, "content: pull of source-0"); n != 10 {
		t.Errorf("%d mismatch lines, want the first 10:\n%s", n, got)
	}
	if !strings.Contains(got, "content: more pulls returned other text than the source's; the summary lines count them (wrong=N), report.md lists them") {
		t.Errorf("no line saying more came:\n%s", got)
	}
	if !strings.Contains(got, "source-0 n=12 hit=12 p50=0.02s max=0.02s wrong=12 | source-1 n=1 hit=1 p50=0.02s max=0.02s\n") {
		t.Errorf("summary without wrong=12 on source-0 alone:\n%s", got)
	}
	if off := run(0); strings.Contains(off, "content") || strings.Contains(off, "wrong") {
		t.Errorf("the content check off, yet texts are told:\n%s", off)
	}
}

// TestPrinterSaysPDModeAndANewAddress: a pd run's first line says its mode
// (a p2p run's stays the seed's), and a source's new address is a line; a
// source's first address is not news.
func TestPrinterSaysPDModeAndANewAddress(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	p.Print(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Mode: event.ModePD, Case: "replace", Engine: "sim", Sources: 2, TimeScale: 1, Interval: 500 * time.Millisecond}})
	p.Print(event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{Source: 0, URL: "http://127.0.0.1:8100", P2P: "127.0.0.1:7777"}})
	p.Print(event.Event{T: 39 * time.Second, Kind: event.KindAddress, Address: &event.AddressInfo{Source: 0, URL: "http://127.0.0.1:23110", P2P: "127.0.0.1:18313", Prev: "127.0.0.1:7777", At: 39160 * time.Millisecond}})
	want := "[   0.00s] run: arm main, mode pd, case replace, engine sim, 2 sources, time scale 1, a trial every 0.50s per source\n" +
		"[  39.00s] source-0: pulls name 127.0.0.1:18313 (http://127.0.0.1:23110) from 39.16s on, not 127.0.0.1:7777\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

// Pulls in flight show on their second's line, and a live check that
// pulls in flight past its bound failed is printed at once, before any of
// them returned; once it holds again, that is printed too.
func TestPrinterSaysWhenPullsInFlightBreakABound(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	p.Print(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "stall", Sources: 2, TimeScale: 1}})
	for i := range 4 {
		start := 10*time.Second + time.Duration(i)*500*time.Millisecond
		p.Print(event.Event{T: start, Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: 0, Trial: int64(100 + i), Start: start}}})
	}
	p.Print(event.Event{T: 11 * time.Second, Kind: event.KindSamples, Samples: []event.Sample{sample(1, 10*time.Second, 30*time.Millisecond, 384)}})
	p.Print(event.Event{T: 12 * time.Second, Kind: event.KindSamples, Samples: []event.Sample{sample(1, 11*time.Second+500*time.Millisecond, 30*time.Millisecond, 384)}})
	live := func(t time.Duration, passed bool, detail string) {
		p.Print(event.Event{T: t, Kind: event.KindVerdict, Verdict: &event.Verdict{Checks: []event.Result{
			{Name: "all_200", Passed: true, Detail: "all 4 decoder requests returned 200", Pending: 4},
			{Name: "faulted_max", Passed: passed, Empty: strings.HasPrefix(detail, "empty") || strings.HasPrefix(detail, "none ended yet"), Detail: detail, Pending: 4},
			{Name: "recovery_hits_again", Empty: true, Detail: "empty window"},
		}}})
	}
	live(20*time.Second, false, "none ended yet: 4 pulls naming the faulted source started in [10.0s, 20.0s) are in flight, oldest 10.0s")
	live(25*time.Second+100*time.Millisecond, false, "1 request naming the faulted source is in flight past 15.0s (oldest 15.1s)")
	live(26*time.Second, false, "2 requests naming the faulted source are in flight past 15.0s (oldest 16.0s)")
	live(41*time.Second, true, "4 requests naming the faulted source each ended within 15.0s (max 14.90s)")
	got := out.String()
	for _, want := range []string{
		"[  11.00s] source-0 n=0 in-flight=2 oldest=1.00s | source-1 n=1 hit=1 p50=0.03s max=0.03s",
		"[  25.10s] check faulted_max FAILED: 1 request naming the faulted source is in flight past 15.0s (oldest 15.1s)",
		"[  41.00s] check faulted_max holds again: 4 requests",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "FAILED") != 1 || strings.Contains(got, "recovery_hits_again") || strings.Contains(got, "[  20.00s] check") {
		t.Errorf("want one FAILED line (not for an empty check, not again while it stays failed):\n%s", got)
	}
}

// A nemesis run prints its schedule once, from its schedule event: how it
// was drawn, then a line per fault; its run event's timeline is not
// printed again. A scripted run's timeline is printed from the run event.
func TestPrinterPrintsANemesisScheduleFromItsEvent(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	p.Print(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "nemesis", Nemesis: "random", Sources: 2, TimeScale: 0.5,
		Timeline: "at 10s kill source-1; at 1m20s loss 30% source-0 for 20s"}})
	p.Print(event.Event{Kind: event.KindSchedule, Schedule: &event.ScheduleInfo{
		Nemesis: "random", Seed: 7, Kinds: []string{"kill", "loss=30%"}, Sources: []int{0, 1}, AtOnce: 1,
		Gap: 20 * time.Second, GapSpread: 7500 * time.Millisecond, Length: 15 * time.Second, LengthSpread: 7500 * time.Millisecond, Settle: 14500 * time.Millisecond,
		Steps: []event.ScheduledFault{
			{At: 5 * time.Second, Action: "kill", Source: 1},
			{At: 40 * time.Second, Action: "loss", Arg: "30%", Source: 0, For: 10 * time.Second},
		}}})
	got := out.String()
	for _, want := range []string{
		"schedule: nemesis random, seed 7: 2 faults from kill, loss=30% on source-0, source-1, gap 20.00s ± 7.50s, length 15.00s ± 7.50s, a kill 14.50s, at most 1 at a time",
		"schedule:   at 5.00s kill source-1\n",
		"schedule:   at 40.00s loss 30% source-0 for 10.00s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "timeline:") {
		t.Errorf("a nemesis' timeline printed from its run event too:\n%s", got)
	}

	out.Reset()
	p = New(&out, "")
	p.Print(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "stall", Timeline: "at 10s stall source-0 for 30s"}})
	p.Print(event.Event{Kind: event.KindSchedule, Schedule: &event.ScheduleInfo{Timeline: "at 10s stall source-0 for 30s",
		Steps: []event.ScheduledFault{{At: 10 * time.Second, Action: "stall", For: 30 * time.Second}}}})
	if got := out.String(); strings.Count(got, "timeline: at 10s stall source-0 for 30s") != 1 || strings.Contains(got, "schedule:") {
		t.Errorf("a scripted run's timeline, printed once:\n%s", got)
	}
}

// A settled window's verdict is a line of its own: pass with its times,
// or FAIL with the checks that failed.
func TestPrinterPrintsEachSettledWindow(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	d := 0.09
	p.Print(event.Event{T: 40 * time.Second, Kind: event.KindWindowVerdict, WindowVerdict: &event.WindowVerdict{
		Index: 1, Kind: "kill", Source: 1, Start: 10 * time.Second, End: 17300 * time.Millisecond, Passed: true,
		Times: event.Times{DetectS: &d, RecoverS: &d}}})
	p.Print(event.Event{T: 90 * time.Second, Kind: event.KindWindowVerdict, WindowVerdict: &event.WindowVerdict{
		Index: 2, Kind: "stall", Source: 0, Start: 50 * time.Second, End: 70 * time.Second,
		Checks: []event.Result{{Name: "faulted_max", Detail: "a request naming the faulted source took 30.0s (bound 15.0s)"}, {Name: "healthy_keeps_hitting", Passed: true}}}})
	for _, want := range []string{
		"[  40.00s] window 1: kill source-1 at 10.00s for 7.30s: pass (detect 0.09s, recover 0.09s)\n",
		"[  90.00s] window 2: stall source-0 at 50.00s for 20.00s: FAIL (detect –, recover –): faulted_max: a request naming the faulted source took 30.0s (bound 15.0s)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPrinterNamesTheCauseOfSlowPulls: the pulls of a batch that ended over
// the healthy bound are named by their cause and timer, one line per source
// and cause; a fast pull is not.
func TestPrinterNamesTheCauseOfSlowPulls(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	p.Print(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "stall", Sources: 2, TimeScale: 1,
		Bounds: event.Bounds{HealthyMax: 5 * time.Second}}})
	hs := &event.Timer{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: 30 * time.Second}
	slow := func(start, lat time.Duration, c event.Cause, tm *event.Timer) event.Sample {
		s := sample(0, start, lat, 0)
		s.Cause, s.Timer = c, tm
		return s
	}
	fast := sample(1, 50*time.Second, 20*time.Millisecond, 384)
	fast.Cause = event.CauseP2P
	p.Print(event.Event{T: 52 * time.Second, Kind: event.KindSamples, Samples: []event.Sample{
		slow(22*time.Second, 30*time.Second, event.CauseHandshake, hs),
		slow(40*time.Second, 12*time.Second, event.CauseHandshake, hs),
		slow(41*time.Second, 11*time.Second, event.CauseUnknown, nil),
		fast,
	}})
	got := out.String()
	for _, want := range []string{
		"[  52.00s] slow: 2 pulls of source-0 took 12.00s–30.00s: waited on a new session until the handshake deadline (VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s)",
		"[  52.00s] slow: 1 pull of source-0 took 11.00s: unknown: the evidence does not say",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "of source-1") {
		t.Errorf("a fast pull named as slow:\n%s", got)
	}
}

// TestPrinterNamesWhatPullsInFlightWaitOn: while the decoder's log says a
// new session awaits its connect_ack, each second's line is followed by
// the pulls in flight naming that peer and what they wait on; once the
// session is reaped the line is gone.
func TestPrinterNamesWhatPullsInFlightWaitOn(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	const peer = "127.0.0.1:7777"
	var starts []event.PullStart
	for i := range 3 {
		starts = append(starts, event.PullStart{Source: 0, Trial: int64(i), Start: 22*time.Second + time.Duration(i)*500*time.Millisecond, Peer: peer})
	}
	// Sent 50 ms before 24 s: too young to count as waiting (it may be a
	// local prefill beside the pending handshake).
	starts = append(starts, event.PullStart{Source: 0, Trial: 3, Start: 23950 * time.Millisecond, Peer: peer})
	starts = append(starts, event.PullStart{Source: 1, Trial: 9, Start: 22 * time.Second, Peer: "127.0.0.1:7778"})
	for _, ev := range []event.Event{
		{T: 22 * time.Second, Kind: event.KindPullStart, Pulls: starts},
		{T: 22 * time.Second, Kind: event.KindWait, Wait: &event.Wait{Peer: peer, What: event.CauseHandshake, Open: true,
			Since: 22 * time.Second, Timer: &event.Timer{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: 30 * time.Second}}},
		{Kind: event.KindSamples, Samples: []event.Sample{{Source: 1, Trial: 9, Start: 22 * time.Second, Latency: 30 * time.Millisecond, Status: 200, CachedTokens: 384}}},
		{Kind: event.KindSamples, Samples: []event.Sample{{Source: 1, Trial: 10, Start: 23100 * time.Millisecond, Latency: 30 * time.Millisecond, Status: 200, CachedTokens: 384}}},
		{T: 52 * time.Second, Kind: event.KindWait, Wait: &event.Wait{Peer: peer, What: event.CauseHandshake, Since: 52 * time.Second}},
		{Kind: event.KindSamples, Samples: []event.Sample{{Source: 1, Trial: 11, Start: 52100 * time.Millisecond, Latency: 30 * time.Millisecond, Status: 200, CachedTokens: 384}}},
		{T: 54 * time.Second, Kind: event.KindEnd},
	} {
		p.Print(ev)
	}
	got := out.String()
	// At 23 s two of source-0's pulls had started; at 24 s three had
	// waited 100 ms or more.
	for _, want := range []string{
		"[  23.00s] ◆ in flight 2: handshake with 127.0.0.1:7777 since 22.0 s (deadline 30 s)\n",
		"[  24.00s] ◆ in flight 3: handshake with 127.0.0.1:7777 since 22.0 s (deadline 30 s)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "◆"); n != 2 {
		t.Errorf("%d wait lines, want 2 (none once the session was reaped):\n%s", n, got)
	}
}

// TestPrinterSaysWhichRankIsStopped: one rank's core stopped (its engine
// ready, StoppedRanks [1]) prints as that rank stopped, once, and its
// resume as the engine ready again; the whole engine stopped prints as
// stopped.
func TestPrinterSaysWhichRankIsStopped(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, "")
	ready := event.EngineInfo{Name: "source-0", State: event.StateReady, Pid: 10, Sid: 10, HTTPPort: 8100, P2PPort: 7777}
	rank1, whole := ready, ready
	rank1.StoppedRanks = []int{1}
	whole.State = event.StateStopped
	for i, in := range []event.EngineInfo{ready, rank1, rank1, ready, whole} {
		p.Print(event.Event{T: time.Duration(i) * time.Second, Kind: event.KindEngine, Engine: &in})
	}
	p.flush()
	got := out.String()
	for _, want := range []string{"source-0 rank1 stopped (pid 10", "source-0 stopped (pid 10"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("output should say %q once:\n%s", want, got)
		}
	}
	if strings.Count(got, "source-0 ready") != 2 {
		t.Errorf("output should say source-0 ready twice (at the start and after the rank's resume):\n%s", got)
	}
}
