package report

import (
	"strings"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// withoutFinal drops the final verdict and the end event: a crashed run
// whose checks the report must evaluate itself.
func withoutFinal(evs []event.Event) []event.Event {
	var out []event.Event
	for _, ev := range evs {
		if (ev.Kind == event.KindVerdict && ev.Final) || ev.Kind == event.KindEnd {
			continue
		}
		out = append(out, ev)
	}
	return out
}

func verification(action string, at time.Duration, ok bool, detail string) event.Event {
	v := event.Verification{Action: action, Source: 0, At: at, Verified: ok, After: 3 * ms, Detail: detail}
	return event.Event{T: at, Kind: event.KindVerification, Verification: &v}
}

// A run rebuilt from its events gets fault_took_effect from its
// verification events, failing when one did not take effect, and the
// times of its judged window.
func TestRebuildJudgesVerificationsAndTimes(t *testing.T) {
	f := fixedStall()
	evs := withoutFinal(f.events())
	evs = append(evs,
		verification("stall", 10*time.Second, true, "2 of 2 processes of session 42 in state T"),
		verification("resume", 40*time.Second, false, "not seen within 2s: 1 of 2 processes of session 42 still in state T"))
	r, err := FromEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Recomputed {
		t.Fatal("no final verdict, yet not recomputed")
	}
	var took *event.Result
	for i, c := range r.Verdict.Checks {
		if c.Name == check.NameFaultTookEffect {
			took = &r.Verdict.Checks[i]
		}
	}
	if took == nil || took.Passed || r.Verdict.Passed {
		t.Fatalf("fault_took_effect = %+v, verdict passed %v; want it failed and the run with it", took, r.Verdict.Passed)
	}
	if !strings.Contains(took.Detail, "resume source-0 at 40.0s not seen") {
		t.Errorf("detail %q does not name the resume", took.Detail)
	}
	row := r.Row()
	if row.Times == nil || row.Times.DetectS == nil || row.Times.RecoverS == nil {
		t.Fatalf("row times %+v, want both", row.Times)
	}
	// The first pull after the last slow one (the 7.08 s-long first):
	// sent at 10.54 s, 10 ms long, and every later one as fast.
	if d := *row.Times.DetectS; d < 0.5 || d > 0.6 {
		t.Errorf("detect_s %.3f, want about 0.55", d)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, row); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "resume source-0 at 40.0s **did not take effect**") {
		t.Errorf("report.md does not list the failed verification:\n%s", md.String())
	}

	// Without verification events (a stream written before them) there
	// is no such check.
	r, _ = FromEvents(withoutFinal(f.events()))
	for _, c := range r.Verdict.Checks {
		if c.Name == check.NameFaultTookEffect {
			t.Errorf("fault_took_effect without verifications: %+v", c)
		}
	}
}

func scrapeAt(t time.Duration, engine string, r event.Reading) event.Event {
	return event.Event{T: t, Kind: event.KindMetrics, Metrics: &event.MetricsInfo{Engine: engine, Reading: r}}
}

// The decoder's deltas over the fault and recovery windows, from its
// metrics events; a decoder exporting none of the series gives – and does
// not change the verdict.
func TestDecoderDeltasOverTheWindows(t *testing.T) {
	f := fixedStall()
	evs := f.events()
	for s := 0; s <= 70; s++ {
		at := time.Duration(s) * time.Second
		hits := float64(100 * s)
		if s > 10 && s <= 40 {
			hits = 1000 // nothing hit during the stall
		} else if s > 40 {
			hits = 1000 + float64(50*(s-40))
		}
		evs = append(evs, scrapeAt(at, "decoder", event.Reading{
			Running: event.MetricOf(1), Waiting: event.MetricOf(float64(s % 7)),
			ExtHits: event.MetricOf(hits), ExtQueries: event.MetricOf(float64(100 * s)), P2PReadBytes: event.MetricOf(hits * 1024),
		}))
	}
	r, err := FromEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Row().Decoder
	if d == nil || d.Recovery == nil {
		t.Fatalf("decoder metrics %+v, want fault and recovery windows", d)
	}
	// The deltas span the scrapes from the window's start to the last
	// one before its end: 10 s to 39 s, and 40 s to 64 s (25 s recovery).
	if d.Fault.From != 10*time.Second || d.Fault.To != 39*time.Second ||
		d.Fault.ExtHits.V != 0 || d.Fault.ExtQueries.V != 2900 || !d.Fault.HitRate.OK || d.Fault.HitRate.V != 0 {
		t.Errorf("fault window %v–%v: hits %v of %v (rate %v), want 0 of 2900 over 10s–39s", d.Fault.From, d.Fault.To, d.Fault.ExtHits, d.Fault.ExtQueries, d.Fault.HitRate)
	}
	if d.Recovery.ExtHits.V != 1200 || d.Recovery.ExtQueries.V != 2400 || d.Recovery.HitRate.V != 0.5 || d.Recovery.MaxWaiting.V != 6 {
		t.Errorf("recovery window: hits %v of %v, max waiting %v; want 1200 of 2400, 6", d.Recovery.ExtHits, d.Recovery.ExtQueries, d.Recovery.MaxWaiting)
	}

	// An engine that exports none of the series.
	evs = f.events()
	for s := 0; s <= 70; s++ {
		evs = append(evs, scrapeAt(time.Duration(s)*time.Second, "decoder", event.Reading{}))
	}
	r, err = FromEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	row := r.Row()
	if !row.Passed {
		t.Error("a decoder without the series failed the run")
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, row); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| + #64501 | stall | fault | – | – / – | – | – | – |") {
		t.Errorf("report.md does not show – for the absent series:\n%s", md.String())
	}
}
