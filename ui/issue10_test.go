package ui

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/check"
	"p2pfault/event"
)

// starts tells every pull of the scene as it was sent: one pull_start
// event a pull, at its start.
func (s *script) starts(sources int, from, to, interval time.Duration, firstTrial int64) {
	trial := firstTrial
	for t := from; t < to; t += interval {
		for i := 0; i < sources; i++ {
			trial++
			s.add(t, event.Event{Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: i, Trial: trial, Start: t}}})
		}
	}
}

// sceneInFlight is a stall 12 s old: every pull naming source-0 since the
// stall hangs (told by pull_start, no sample yet); source-1 keeps hitting.
func sceneInFlight() scene {
	s := stalledAt10s()
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	s.engine(10100*time.Millisecond, engineInfo("source-0", 0, event.StateStopped, 4200, 29*time.Second))
	first := s.trial
	s.starts(2, 10*time.Second, 22*time.Second, 500*time.Millisecond, first)
	s.trial = first
	var healthyOnly []event.Sample
	for t := 10 * time.Second; t < 22*time.Second; t += 500 * time.Millisecond {
		for i := 0; i < 2; i++ {
			s.trial++
			if i == 1 {
				l, _ := healthy(i, t, s.trial)
				healthyOnly = append(healthyOnly, event.Sample{Source: 1, Trial: s.trial, SeedStatus: 200, Start: t, Latency: l, Status: 200, PromptTokens: 300, CachedTokens: 256})
			}
		}
	}
	s.add(22*time.Second, event.Event{Kind: event.KindSamples, Samples: healthyOnly})
	// The live verdict counts the 24 pulls in flight by their age: the 20
	// sent from 12 s on have waited 0.5–10 s, 5.25 s at the median, past
	// its 2 s bound, before any returned.
	s.verdict(22*time.Second, s.judged(22*time.Second), false)
	return scene{events: s.events, now: 22 * time.Second, ctrl: newFakeCtrl()}
}

// metrics is one scrape of an engine as the poller sends it.
func (s *script) metrics(t time.Duration, engine string, live event.Live) {
	s.add(t, event.Event{Kind: event.KindMetrics, Metrics: &event.MetricsInfo{Engine: engine, Live: live}})
}

// sceneEngineMetrics is a steady run whose engines' /metrics were
// scraped; source-1 exports none of the series read.
func sceneEngineMetrics() scene {
	sc := sceneSteady()
	s := &script{events: sc.events}
	s.metrics(sc.now, "decoder", event.Live{Running: event.MetricOf(1), Waiting: event.MetricOf(3), HitRate: event.MetricOf(0.95), P2PReadBps: event.MetricOf(1.25e6), Window: 10 * time.Second})
	s.metrics(sc.now, "source-0", event.Live{Running: event.MetricOf(0), Waiting: event.MetricOf(0), HitRate: event.MetricOf(1), P2PReadBps: event.MetricOf(0), Window: 10 * time.Second})
	s.metrics(sc.now, "source-1", event.Live{})
	return scene{events: s.events, now: sc.now, ctrl: sc.ctrl}
}

// sceneTimes is the failed stall's end, its verdict carrying detect and
// recover times and the fault's verification.
func sceneTimes() scene {
	sc := sceneFailedChecks()
	for i := range sc.events {
		if ev := &sc.events[i]; ev.Kind == event.KindVerdict && ev.Final {
			v := *ev.Verdict
			d, r := 30.01, 0.52
			v.Times = &event.Times{DetectS: &d, RecoverS: &r}
			v.Checks = append(append([]event.Result(nil), v.Checks...), event.Result{Name: check.NameFaultTookEffect, Passed: true, Detail: "all 2 fault actions took effect within 2.0s"})
			ev.Verdict = &v
		}
	}
	return sc
}

func TestIssue10ViewsMatchGolden(t *testing.T) {
	scenes := []struct {
		name  string
		scene func() scene
	}{
		{"in_flight", sceneInFlight},
		{"engine_metrics", sceneEngineMetrics},
		{"times", sceneTimes},
	}
	for _, sc := range scenes {
		for _, size := range []struct{ w, h int }{{80, 24}, {160, 48}} {
			t.Run(sc.name+"_"+strconv.Itoa(size.w)+"x"+strconv.Itoa(size.h), func(t *testing.T) {
				out := feed(t, sc.scene(), size.w, size.h).View()
				assertFits(t, out, size.w, size.h)
				golden.RequireEqual(t, []byte(out))
			})
		}
	}
}

// The panel of a stalled source says how many pulls hang and how old the
// oldest is, and the age grows with the clock between events.
func TestInFlightOldestGrows(t *testing.T) {
	sc := sceneInFlight()
	at := func(now time.Duration) string {
		sc.now = now
		return feed(t, sc, 160, 48).View()
	}
	re := regexp.MustCompile(`in flight (\d+), oldest (\d+\.\d)s`)
	first := re.FindStringSubmatch(at(22 * time.Second))
	later := re.FindStringSubmatch(at(24 * time.Second))
	if first == nil || later == nil {
		t.Fatalf("no in-flight line: %v, %v", first, later)
	}
	if first[1] != "24" || first[2] != "12.0" || later[2] != "14.0" {
		t.Errorf("in flight %s oldest %s, then oldest %s; want 24 pulls, 12.0s then 14.0s", first[1], first[2], later[2])
	}
	// source-1's pulls all ended: its panel shows none in flight.
	if !strings.Contains(at(22*time.Second), "in flight 0") {
		t.Error("the healthy source's panel lacks \"in flight 0\"")
	}
	// A stream without pull_start events keeps the panel as it was.
	if strings.Contains(feed(t, sceneStalled(), 160, 48).View(), "in flight") {
		t.Error("a stream without pull starts shows an in-flight line")
	}
}

// brailleColumns lists the columns of row-wise text holding braille dots
// (the latency line) or the in-flight mark.
func brailleColumns(out string, r rune) []int {
	seen := map[int]bool{}
	var cols []int
	for _, line := range strings.Split(out, "\n") {
		for x, c := range []rune(line) {
			if (r == 0 && c >= 0x2801 && c <= 0x28FF) || (r != 0 && c == r) {
				if !seen[x] {
					seen[x] = true
					cols = append(cols, x)
				}
			}
		}
	}
	return cols
}

// A 20 s pull sent at 10 s is drawn at 10 s (a sixth of the way into a
// 0–60 s chart), not where it ended (half way); a pull in flight is
// drawn where it started, with its own mark.
func TestChartPutsAPullAtItsStartTime(t *testing.T) {
	st := NewStyles(asciiRenderer())
	styles := &st
	pts := newRing[point](8)
	pts.Push(point{end: 30 * time.Second, latency: 20 * time.Second, ok: true})
	spans := newRing[span](1)
	c := latencyChart{points: &pts, spans: &spans, from: 0, to: 60 * time.Second, maxGap: time.Second, styles: styles}
	const w, h = 70, 12
	out := c.Render(w, h)
	cols := brailleColumns(out, 0)
	if len(cols) != 1 {
		t.Fatalf("braille in columns %v, want one:\n%s", cols, out)
	}
	// The graph starts after the y labels; find it from the axis corner.
	axis := strings.IndexRune(strings.Split(out, "\n")[h-2], '└')
	gw := w - axis - 1
	x := float64(cols[0]-axis-1) / float64(gw-1) * 60
	if x < 8 || x > 12 {
		t.Errorf("the pull is drawn at %.1fs, want its start 10s (its end is 30s):\n%s", x, out)
	}

	c.inflight = []time.Duration{40 * time.Second}
	out = c.Render(w, h)
	marks := brailleColumns(out, inflightRune)
	if len(marks) != 1 {
		t.Fatalf("in-flight marks in columns %v, want one:\n%s", marks, out)
	}
	if x := float64(marks[0]-axis-1) / float64(gw-1) * 60; x < 38 || x > 42 {
		t.Errorf("the pull in flight is drawn at %.1fs, want its start 40s:\n%s", x, out)
	}
}

// An engine exporting none of the series shows "–" in every column, not 0,
// and is no warning.
func TestEngineWithoutSeriesShowsDashes(t *testing.T) {
	m := feed(t, sceneEngineMetrics(), 160, 48)
	out := m.View()
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "source-1 ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 4 || strings.Join(f[len(f)-4:], " ") != "– – – –" {
		t.Errorf("source-1's row %q does not end in four –", row)
	}
	if !strings.Contains(out, "RUN") || !strings.Contains(out, "95%") || !strings.Contains(out, "1.2 MB/s") {
		t.Errorf("the process table lacks the decoder's metrics:\n%s", out)
	}
	if strings.Contains(out, "warning") {
		t.Errorf("an engine without the series made a warning:\n%s", out)
	}
}

// judged is the live verdict the experiment would send at t for the
// script's events so far: check's, over its samples and the pulls its
// pull_start events name without a sample yet, on its first fault window
// (open until t).
func (s *script) judged(t time.Duration) event.Verdict {
	var (
		samples []event.Sample
		starts  []event.PullStart
		windows []event.Window
		bounds  event.Bounds
	)
	for _, ev := range s.events {
		switch ev.Kind {
		case event.KindRun:
			bounds = ev.Run.Bounds
		case event.KindSamples:
			samples = append(samples, ev.Samples...)
		case event.KindPullStart:
			starts = append(starts, ev.Pulls...)
		case event.KindWindow:
			windows = append(windows, *ev.Window)
		}
	}
	ended := map[int64]bool{}
	for _, x := range samples {
		ended[x.Trial] = true
	}
	var pending []event.PullStart
	for _, p := range starts {
		if !ended[p.Trial] {
			pending = append(pending, p)
		}
	}
	w, _ := check.Judged(windows, true)
	if w.End == 0 {
		w.End = t
	}
	v, _ := check.JudgeRun(check.RunFacts{Setup: check.Setup{Bounds: bounds, Sources: 2, Scripted: true},
		Windows: []event.Window{w}, Samples: samples, Pending: pending, Now: t, RunEnd: t})
	// The run's verdict on the window, as the header and the checks panel
	// read it (the windows' own verdicts and the steady state left out).
	return event.Verdict{Passed: v.Passed, Checks: v.Checks, Summary: v.Summary, Times: v.Times}
}
