package exporter

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"p2pfault/check"
	"p2pfault/event"
)

var wall0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// value is the one sample of name with labels (a subset) in x's registry,
// and whether there is exactly one.
func value(t *testing.T, x *Exporter, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := x.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			out = append(out, sampleValue(mf.GetType(), m))
		}
	}
	if len(out) != 1 {
		return 0, false
	}
	return out[0], true
}

func sampleValue(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return math.NaN()
}

func want(t *testing.T, x *Exporter, name string, labels map[string]string, w float64) {
	t.Helper()
	got, ok := value(t, x, name, labels)
	switch {
	case !ok:
		t.Errorf("%s%v: not exactly one series", name, labels)
	case math.IsNaN(w) && !math.IsNaN(got), !math.IsNaN(w) && got != w:
		t.Errorf("%s%v = %v, want %v", name, labels, got, w)
	}
}

func absent(t *testing.T, x *Exporter, name string, labels map[string]string) {
	t.Helper()
	if v, ok := value(t, x, name, labels); ok {
		t.Errorf("%s%v = %v, want no series", name, labels, v)
	}
}

// TestAStallAsTheSeriesTellIt feeds the events of a stall on source-0 of
// two sources, as the experiment sends them, and reads the series at each
// step: pulls in flight and the oldest one's age while it hangs, the fault
// in force with its start as value, the window's checks NaN before the
// first verdict and 0 once faulted_max failed, then the window counted as
// failed at the run's end, outcomes and the latency histogram per source,
// trials due against trials sent, and the content check's wrong count.
func TestAStallAsTheSeriesTellIt(t *testing.T) {
	now := wall0
	x := newAt(func() time.Time { return now })
	s := x.Stream()
	row := map[string]string{"arm": "main", "mode": "p2p", "case": "stall"}
	src := func(i int, more ...string) map[string]string {
		m := map[string]string{"source": event.SourceName(i)}
		for k, v := range row {
			m[k] = v
		}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i]] = more[i+1]
		}
		return m
	}
	feed := func(at time.Duration, ev event.Event) {
		ev.T, ev.Wall, ev.Arm = at, wall0.Add(at), "main"
		now = ev.Wall
		s.Feed(ev)
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	info := event.RunInfo{Arm: "main", Case: "stall", Mode: event.ModeP2P, Engine: "sim", TimeScale: 0.1, Sources: 2,
		Interval: 50 * time.Millisecond, ContentTokens: 8, ContentMatch: "exact"}
	feed(0, event.Event{Kind: event.KindRun, Run: &info})
	want(t, x, "p2pfault_run_info", map[string]string{"arm": "main", "engine": "sim", "time_scale": "0.1"}, 1)
	feed(time.Microsecond, event.Event{Kind: event.KindPhase, Phase: event.PhaseBaseline})

	// A healthy pull on each source, one wrong text on source-1.
	feed(sec(0.1), event.Event{Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: 0, Trial: 0, Start: 0}, {Source: 1, Trial: 1, Start: sec(0.025)}}})
	feed(sec(0.2), event.Event{Kind: event.KindSamples, Samples: []event.Sample{
		{Source: 0, Trial: 0, Start: 0, Latency: sec(0.02), Status: 200, CachedTokens: 64, Content: event.ContentSame},
		{Source: 1, Trial: 1, Start: sec(0.025), Latency: sec(0.03), Status: 200, Content: event.ContentDiffers, PullText: "a", SourceText: "b"},
		{Source: 1, Trial: 3, Start: sec(0.075), Err: "not sent: 64 requests in flight", Aborted: true}, // never sent: no pull
	}})
	want(t, x, "p2pfault_pulls_total", src(0, "outcome", OutcomeHit), 1)
	want(t, x, "p2pfault_pulls_total", src(1, "outcome", OutcomeMiss), 1)
	absent(t, x, "p2pfault_pulls_total", src(1, "outcome", OutcomeError))
	want(t, x, "p2pfault_content_wrong_total", src(1), 1)
	want(t, x, "p2pfault_content_wrong_total", src(0), 0)
	want(t, x, "p2pfault_content_compared_total", src(1), 1)

	// The stall: the window opens at 1 s, its checks are NaN, three pulls
	// of source-0 hang.
	open := event.Window{Source: 0, Start: sec(1), Recovers: true, Kind: "stall"}
	feed(sec(1), event.Event{Kind: event.KindWindow, Window: &open})
	want(t, x, "p2pfault_fault_start_timestamp_seconds", src(0, "kind", "stall"), float64(wall0.Add(sec(1)).UnixNano())/1e9)
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "1", "check": check.NameFaultedBound}, math.NaN())
	want(t, x, "p2pfault_check_passed", map[string]string{"window": WindowRun, "check": check.NameRecovery}, math.NaN())
	feed(sec(1.3), event.Event{Kind: event.KindPullStart, Pulls: []event.PullStart{
		{Source: 0, Trial: 40, Start: sec(1)}, {Source: 0, Trial: 42, Start: sec(1.05)}, {Source: 0, Trial: 44, Start: sec(1.1)}}})
	now = wall0.Add(sec(3))
	want(t, x, "p2pfault_pulls_in_flight", src(0), 3)
	want(t, x, "p2pfault_pulls_in_flight", src(1), 0)
	want(t, x, "p2pfault_pull_oldest_in_flight_age_seconds", src(0), 2)
	want(t, x, "p2pfault_pull_oldest_in_flight_age_seconds", src(1), 0)
	// Due by 3 s at 50 ms a source: source-0 at 0, 50 ms, ... 3 s (61),
	// source-1 phased 25 ms later (60); sent: 4 and 1.
	want(t, x, "p2pfault_trials_due_total", src(0), 61)
	want(t, x, "p2pfault_trials_due_total", src(1), 60)
	want(t, x, "p2pfault_trials_sent_total", src(0), 4)

	// The first live verdict: no pull of the window ended yet, so
	// faulted_max is empty, not failed.
	empty := event.Verdict{Checks: []event.Result{{Name: check.NameAll200, Passed: true}, {Name: check.NameFaultedBound, Empty: true, Pending: 3}}}
	feed(sec(1.4), event.Event{Kind: event.KindVerdict, Verdict: &empty})
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "1", "check": check.NameFaultedBound}, math.NaN())
	want(t, x, "p2pfault_check_passed", map[string]string{"window": WindowRun, "check": check.NameFaultedBound}, math.NaN())
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "1", "check": check.NameAll200}, 1)
	failing := event.Verdict{Checks: []event.Result{{Name: check.NameAll200, Passed: true}, {Name: check.NameFaultedBound, Passed: false}}}
	feed(sec(3), event.Event{Kind: event.KindVerdict, Verdict: &failing})
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "1", "check": check.NameFaultedBound}, 0)
	want(t, x, "p2pfault_check_passed", map[string]string{"window": WindowRun, "check": check.NameFaultedBound}, 0)
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "1", "check": check.NameAll200}, 1)
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "1", "check": check.NameHealthy}, math.NaN())

	// Resumed at 4 s: the window closes, the pulls end as misses.
	closed := open
	closed.End = sec(4)
	feed(sec(4), event.Event{Kind: event.KindWindow, Window: &closed})
	absent(t, x, "p2pfault_fault_start_timestamp_seconds", src(0, "kind", "stall"))
	feed(sec(4.1), event.Event{Kind: event.KindSamples, Samples: []event.Sample{
		{Source: 0, Trial: 40, Start: sec(1), Latency: sec(3), Status: 200},
		{Source: 0, Trial: 42, Start: sec(1.05), Latency: sec(2.95), Status: 200},
		{Source: 0, Trial: 44, Start: sec(1.1), Latency: sec(2.9), Status: 500},
	}})
	want(t, x, "p2pfault_pulls_in_flight", src(0), 0)
	want(t, x, "p2pfault_pulls_total", src(0, "outcome", OutcomeMiss), 2)
	want(t, x, "p2pfault_pulls_total", src(0, "outcome", OutcomeError), 1)
	want(t, x, "p2pfault_pull_duration_seconds", src(0, "outcome", OutcomeMiss), 2)
	want(t, x, "p2pfault_windows_judged_total", map[string]string{"kind": "stall", "result": ResultFailed}, 0)

	feed(sec(6), event.Event{Kind: event.KindPhase, Phase: event.PhaseDone})
	final := failing
	final.Passed = false
	feed(sec(6.1), event.Event{Kind: event.KindVerdict, Verdict: &final, Final: true})
	want(t, x, "p2pfault_windows_judged_total", map[string]string{"kind": "stall", "result": ResultFailed}, 1)
	want(t, x, "p2pfault_windows_judged_total", map[string]string{"kind": "stall", "result": ResultPassed}, 0)
	feed(sec(6.2), event.Event{Kind: event.KindEnd, Message: "a bound failed", ExitCode: 1})
	now = wall0.Add(time.Minute)
	want(t, x, "p2pfault_trials_due_total", src(0), 121) // frozen at the probe's stop, 6 s

	// The latency histogram is native too (a schema and buckets beside
	// the classic ones).
	mfs, err := x.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "p2pfault_pull_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.Schema == nil || len(h.GetPositiveSpan()) == 0 || len(h.GetBucket()) != len(LatencyBuckets) {
				t.Errorf("pull latency: schema %v, %d native spans, %d classic buckets", h.Schema, len(h.GetPositiveSpan()), len(h.GetBucket()))
			}
		}
	}

	// What a scrape serves passes Prometheus' own linter.
	problems, err := testutil.GatherAndLint(x.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, namespace) {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// TestWindowVerdictsPerWindowAndBounded: in a run of many windows each
// window_verdict sets its window's series and counts it once (the final
// verdict's windows do not count it again), and only the last
// MaxWindowSeries windows keep their series.
func TestWindowVerdictsPerWindowAndBounded(t *testing.T) {
	x := newAt(time.Now)
	s := x.Stream()
	info := event.RunInfo{Arm: "main", Case: "nemesis", Sources: 2, Interval: time.Second}
	s.Feed(event.Event{Kind: event.KindRun, Arm: "main", Run: &info, Wall: wall0})
	n := MaxWindowSeries + 3
	var all []event.WindowVerdict
	for i := 1; i <= n; i++ {
		at := time.Duration(i) * time.Minute
		w := event.Window{Source: i % 2, Start: at, Kind: "kill", Recovers: true}
		s.Feed(event.Event{Kind: event.KindWindow, Arm: "main", T: at, Wall: wall0.Add(at), Window: &w})
		w.End = at + 10*time.Second
		s.Feed(event.Event{Kind: event.KindWindow, Arm: "main", T: w.End, Wall: wall0.Add(w.End), Window: &w})
		v := event.WindowVerdict{Index: i, Kind: "kill", Source: w.Source, Start: w.Start, End: w.End, Passed: i%3 != 0, Settled: true,
			Checks: []event.Result{{Name: check.NameFaultedBound, Passed: i%3 != 0}}}
		all = append(all, v)
		s.Feed(event.Event{Kind: event.KindWindowVerdict, Arm: "main", T: w.End + 30*time.Second, WindowVerdict: &v})
	}
	final := event.Verdict{Windows: all}
	s.Feed(event.Event{Kind: event.KindVerdict, Arm: "main", Final: true, Verdict: &final})
	failed := float64(n / 3)
	want(t, x, "p2pfault_windows_judged_total", map[string]string{"result": ResultFailed}, failed)
	want(t, x, "p2pfault_windows_judged_total", map[string]string{"result": ResultPassed}, float64(n)-failed)
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "9", "check": check.NameFaultedBound}, 0)
	want(t, x, "p2pfault_check_passed", map[string]string{"window": "10", "check": check.NameFaultedBound}, 1)
	absent(t, x, "p2pfault_check_passed", map[string]string{"window": "3", "check": check.NameFaultedBound})
	if got := len(s.arms["main"].windows); got > MaxWindowSeries {
		t.Errorf("%d windows kept, want at most %d", got, MaxWindowSeries)
	}
}

// TestStreamsOfOneArmAreRowsApart: a slice feeds a stream per row, and
// two rows of the arm main (stall, kill) keep their own series.
func TestStreamsOfOneArmAreRowsApart(t *testing.T) {
	x := newAt(time.Now)
	for _, c := range []string{"stall", "kill"} {
		s := x.Stream()
		info := event.RunInfo{Arm: "main", Case: c, Sources: 1, Interval: time.Second}
		s.Feed(event.Event{Kind: event.KindRun, Arm: "main", Run: &info, Wall: wall0})
		s.Feed(event.Event{Kind: event.KindPullStart, Arm: "main", T: 1, Wall: wall0, Pulls: []event.PullStart{{Trial: 0}}})
		s.Feed(event.Event{Kind: event.KindSamples, Arm: "main", T: 2, Wall: wall0, Samples: []event.Sample{{Trial: 0, Status: 200, CachedTokens: 1}}})
	}
	for _, c := range []string{"stall", "kill"} {
		want(t, x, "p2pfault_pulls_total", map[string]string{"case": c, "outcome": OutcomeHit}, 1)
	}
}

func TestParseAddr(t *testing.T) {
	for in, out := range map[string]string{"9464": "127.0.0.1:9464", "0": "127.0.0.1:0", ":9464": ":9464",
		"0.0.0.0:9464": "0.0.0.0:9464", "[::1]:9": "[::1]:9"} {
		if got, err := ParseAddr(in); err != nil || got != out {
			t.Errorf("ParseAddr(%q) = %q, %v; want %q", in, got, err, out)
		}
	}
	for _, in := range []string{"", "x", "host:", "1:2:3", "70000", "localhost:http"} {
		if got, err := ParseAddr(in); err == nil {
			t.Errorf("ParseAddr(%q) = %q, want an error", in, got)
		}
	}
}
