package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/report"
)

// busyLookupScript is a busy run whose decoder exports its async lookup
// delay: ten lookups a second, each ≤5 ms before and after the window,
// each between 25 and 50 ms while source-0 is busy (10-20 s), up to end.
func busyLookupScript(end time.Duration) *script {
	var s script
	s.run(runInfo("busy", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, min(end, 10*time.Second), 500*time.Millisecond, healthy)
	les := []float64{0.005, 0.01, 0.025, 0.05, 0.1}
	var fast, slow float64 // lookups so far ≤5 ms, and in (25 ms, 50 ms]
	for t := time.Second; t <= end; t += time.Second {
		if t > 10*time.Second && t <= 20*time.Second {
			slow += 10
		} else {
			fast += 10
		}
		h := &event.Histogram{Count: fast + slow, Sum: fast*0.003 + slow*0.03}
		for _, le := range les {
			n := fast
			if le >= 0.05 {
				n += slow
			}
			h.Buckets = append(h.Buckets, event.Bucket{Le: le, N: n})
		}
		s.add(t, event.Event{Kind: event.KindMetrics, Metrics: &event.MetricsInfo{Engine: "decoder", Reading: event.Reading{LookupAsync: h}}})
		if t == 10*time.Second {
			s.window(t, event.Window{Source: 0, Start: t, Kind: "busy"})
		}
		if t == 20*time.Second {
			s.window(t, event.Window{Source: 0, Start: 10 * time.Second, End: t, Kind: "busy"})
		}
	}
	s.verdict(end, liveVerdict(true), false)
	return &s
}

// TestTheDashboardShowsTheDecodersLookupDelayPerWindow: the checks panel
// shows the latest fault window's decoder lookup delay beside the idle
// baseline, and the event log each window's as it closes, with the very
// figures the report's lookup_delay rows give for the same events (one
// computation: scrape.Window's LookupAsync over the decoder's readings);
// while the window is open its figure so far.
func TestTheDashboardShowsTheDecodersLookupDelayPerWindow(t *testing.T) {
	s := busyLookupScript(25 * time.Second)
	r, err := report.FromEvents(s.events)
	if err != nil {
		t.Fatal(err)
	}
	rows := r.Row().Lookup
	if len(rows) < 2 || rows[0].Window != "baseline" || rows[1].Window != "1: busy source-0" {
		t.Fatalf("the report's lookup rows %+v: want the baseline and window 1", rows)
	}
	p50, top, ok := delayFigures(rows[1].Delay)
	base, _, baseOK := delayFigures(rows[0].Delay)
	if !ok || !baseOK || top != "≤50ms" || !strings.HasSuffix(base, "ms") {
		t.Fatalf("the report's window delay %+v, baseline %+v: want lookups in both, the window's ≤50ms", rows[1].Delay, rows[0].Delay)
	}
	want := "window 1 busy source-0: lookup p50 " + p50 + " / max " + top + " (baseline " + base + ")"
	t.Logf("report: window %s/%s, baseline %s; the dashboard should say %q", p50, top, base, want)

	m := feed(t, scene{events: s.events, now: 25 * time.Second, ctrl: newFakeCtrl()}, 160, 48)
	if v := m.View(); !strings.Contains(v, want) {
		t.Errorf("the dashboard lacks %q:\n%s", want, v)
	}
	if log := logText(m); !strings.Contains(log, want) {
		t.Errorf("the event log lacks %q at the window's close:\n%s", want, log)
	}

	// Open: its delay so far, slow, and marked open.
	s = busyLookupScript(15 * time.Second)
	m = feed(t, scene{events: s.events, now: 15 * time.Second, ctrl: newFakeCtrl()}, 160, 48)
	if v := m.View(); !strings.Contains(v, "window 1 busy source-0 (open): lookup p50 ") || !strings.Contains(v, "/ max ≤50ms (baseline "+base+")") {
		t.Errorf("the dashboard should show the open window's delay so far:\n%s", v)
	}
	// A decoder that exports no histogram: no line.
	var plain script
	for _, ev := range s.events {
		if ev.Kind != event.KindMetrics {
			plain.events = append(plain.events, ev)
		}
	}
	m = feed(t, scene{events: plain.events, now: 15 * time.Second, ctrl: newFakeCtrl()}, 160, 48)
	if v := m.View(); strings.Contains(v, "lookup p50") {
		t.Errorf("a lookup line without the decoder's histogram:\n%s", v)
	}
}

// TestLookupWindowsKeepOnlyTheReadingsTheSpansNeed: once the first window
// opened, readings before the open window's start (but its anchor) and,
// with none open, all but the latest go.
func TestLookupWindowsKeepOnlyTheReadingsTheSpansNeed(t *testing.T) {
	var l lookupWindows
	r := event.Reading{LookupAsync: &event.Histogram{}}
	for i := 1; i <= 10; i++ {
		l.addReading(time.Duration(i)*time.Second, r)
	}
	if len(l.points) != 10 {
		t.Fatalf("%d readings before the first window, want all 10", len(l.points))
	}
	l.window(event.Window{Source: 0, Start: 5500 * time.Millisecond})
	if len(l.points) != 6 || l.points[0].T != 5*time.Second {
		t.Errorf("with a window open from 5.5 s: %d readings from %v, want 6 from 5s", len(l.points), l.points[0].T)
	}
	for i := 11; i <= 20; i++ {
		l.addReading(time.Duration(i)*time.Second, r)
	}
	l.window(event.Window{Source: 0, Start: 5500 * time.Millisecond, End: 20 * time.Second})
	if len(l.points) != 1 || l.points[0].T != 20*time.Second {
		t.Errorf("no window open: %d readings, want the latest alone", len(l.points))
	}
}
