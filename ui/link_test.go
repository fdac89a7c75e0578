package ui

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
)

// sceneLinked is a run with --link: two sources hitting for 8 s through
// their links, which have passed lookups and heartbeats.
func sceneLinked() scene {
	var s script
	info := runInfo("none", 2, 1)
	info.Link = true
	s.run(info)
	s.upCluster(2)
	s.samples(2, 0, 8*time.Second, 500*time.Millisecond, healthy)
	s.add(8*time.Second, linkEv(
		event.LinkCounts{Pair: "source-0", Source: 0, Passed: 40, Heartbeats: 6},
		event.LinkCounts{Pair: "source-1", Source: 1, Passed: 38, Heartbeats: 6}))
	return scene{events: s.events, now: 8 * time.Second, ctrl: newFakeCtrl()}
}

// sceneMuted is sceneLinked with source-0 muted by its key at 8 s.
func sceneMuted() scene {
	sc := sceneLinked()
	return withEvents(sc, 8*time.Second, faultEv(fault.ActionMute, 0),
		condEv(event.ConditionInfo{Source: 0, Condition: fault.CondLink, Fault: fault.ActionMute, Label: "MUTED"}))
}

func linkEv(counts ...event.LinkCounts) event.Event {
	return event.Event{Kind: event.KindLink, Links: counts}
}

// TestLinkKeysFireMuteHoldAckAndUnlink: on a run with links, m mutes and
// A withholds connect_ack on the selected source, x ends its link fault;
// a link fault in force refuses another in the rule's words, naming x;
// a run without links has no link keys in force.
func TestLinkKeysFireMuteHoldAckAndUnlink(t *testing.T) {
	tests := []struct {
		name  string
		scene func() scene
		keys  []string
		want  []string
		why   string // the event log says it
	}{
		{name: "m mutes source 0", scene: sceneLinked, keys: []string{"m"}, want: []string{"mute 0"}},
		{name: "tab then A holds source 1's connect_ack", scene: sceneLinked, keys: []string{"tab", "A"}, want: []string{"hold-ack 1"}},
		{name: "x ends the mute", scene: sceneMuted, keys: []string{"x"}, want: []string{"unlink 0"}},
		{name: "A on a muted source is refused", scene: sceneMuted, keys: []string{"A"},
			why: "A: source-0 is already faulted on its link; press x to unlink it"},
		{name: "x with no link fault is refused", scene: sceneLinked, keys: []string{"x"},
			why: "x: source-0 is not faulted on its link"},
		{name: "no link keys without links", scene: sceneSteady, keys: []string{"m", "A", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := tt.scene()
				m := press(t, feed(t, sc, 80, 24), tt.keys...)
				if got := sc.ctrl.Calls(); !slices.Equal(got, tt.want) {
					t.Errorf("controller calls = %q, want %q\nlog:\n%s", got, tt.want, logText(m))
				}
				if log := logText(m); tt.why != "" && !strings.Contains(log, tt.why) {
					t.Errorf("event log does not say %q:\n%s", tt.why, log)
				}
			})
		})
	}
}

// TestLinkKeysAreInTheFullHelpOnly: `?` lists m, A and x on a run with
// links, at 80×24 as at 160×48, and the screen still fits; the one-line
// help stays as it was; a run without links lists none of them.
func TestLinkKeysAreInTheFullHelpOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, size := range [][2]int{{80, 24}, {160, 48}} {
			m := feed(t, sceneLinked(), size[0], size[1])
			short := m.View()
			full := press(t, m, "?").View()
			fits(t, full, size[0], size[1])
			for _, want := range []string{"m mute (half-open)", "A hold connect_ack", "x end link fault"} {
				if !strings.Contains(full, want) {
					t.Errorf("%dx%d: ? help lacks %q:\n%s", size[0], size[1], want, full)
				}
				if strings.Contains(short, want) {
					t.Errorf("%dx%d: the one-line help lists %q:\n%s", size[0], size[1], want, short)
				}
			}
			plain := press(t, feed(t, sceneSteady(), size[0], size[1]), "?").View()
			if strings.Contains(plain, "mute") || strings.Contains(plain, "end link fault") {
				t.Errorf("%dx%d: ? help of a run without links lists link keys:\n%s", size[0], size[1], plain)
			}
		}
	})
}

// TestLinkCountersRenderAndMove: the process table's LINK column shows
// each source's link counts as the link events give them, and moves with
// them: a muted source's held lookups grow while its heartbeats flow.
func TestLinkCountersRenderAndMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, size := range [][2]int{{80, 24}, {160, 48}} {
			sc := sceneMuted()
			m := feed(t, sc, size[0], size[1])
			v := m.View()
			fits(t, v, size[0], size[1])
			for _, want := range []string{linkHead, "40/0/0/0/6", "38/0/0/0/6", "MUTED"} {
				if !strings.Contains(v, want) {
					t.Errorf("%dx%d: the dashboard lacks %q:\n%s", size[0], size[1], want, v)
				}
			}
			sc = withEvents(sc, 12*time.Second, linkEv(
				event.LinkCounts{Pair: "source-0", Source: 0, Passed: 44, Withheld: 14, Heartbeats: 12},
				event.LinkCounts{Pair: "source-1", Source: 1, Passed: 60, Heartbeats: 11, Dropped: 1, Delayed: 2}))
			v = feed(t, sc, size[0], size[1]).View()
			for _, want := range []string{"44/14/0/0/12", "60/0/1/2/11"} {
				if !strings.Contains(v, want) {
					t.Errorf("%dx%d: after more link counts the dashboard lacks %q:\n%s", size[0], size[1], want, v)
				}
			}
			if strings.Contains(v, "40/0/0/0/6") {
				t.Errorf("%dx%d: the old counts are still shown:\n%s", size[0], size[1], v)
			}
		}
		if v := feed(t, sceneSteady(), 160, 48).View(); strings.Contains(v, "LINK") {
			t.Errorf("a run without links has a LINK column:\n%s", v)
		}
	})
}

// fits fails when the view is taller or wider than the screen.
func fits(t *testing.T, v string, w, h int) {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) > h {
		t.Errorf("%dx%d: the view has %d lines", w, h, len(lines))
	}
	for i, l := range lines {
		if textWidth(l) > w {
			t.Errorf("%dx%d: line %d is %d wide: %q", w, h, i, textWidth(l), l)
		}
	}
}

// TestLinkCountsStayOnEightyColumns: a run on the sim with links has the
// metrics columns and LINK; on 80 columns the decoder's hit and read
// rates give way after the process columns, so RUN, WAIT, the lookup
// delay and the link's counts stay whole; wide enough, all of them show.
func TestLinkCountsStayOnEightyColumns(t *testing.T) {
	engines := []*engineState{
		{info: event.EngineInfo{Name: "source-0", Role: "source", State: event.StateReady, HTTPPort: 8100, P2PPort: 7777}},
		{info: event.EngineInfo{Name: "decoder", Role: "decoder", State: event.StateReady, HTTPPort: 8200, P2PPort: 7779}},
	}
	metrics := map[string]event.MetricsInfo{
		"source-0": {Engine: "source-0", Live: event.Live{Running: event.MetricOf(0), Waiting: event.MetricOf(0), LookupAsync: event.Delay{Exported: true}}},
		"decoder": {Engine: "decoder", Live: event.Live{Running: event.MetricOf(0), Waiting: event.MetricOf(10), LookupAsync: event.Delay{
			Exported: true, N: 40, P50: event.MetricOf(0.01), Max: event.MetricOf(10)}}},
	}
	links := map[string]event.LinkCounts{"source-0": {Passed: 1834, Withheld: 442, Dropped: 442, Heartbeats: 1440}}
	st := NewStyles(asciiRenderer())
	for _, tt := range []struct {
		w      int
		gone   []string
		stayed []string
	}{
		{w: 80, gone: []string{"EXT HIT", "P2P READ"}, stayed: []string{"RUN", "WAIT", lookupHead, "1834/442/442/0/1440"}},
		{w: 200, stayed: []string{"EXT HIT", "P2P READ", "RUN", lookupHead, "1834/442/442/0/1440"}},
	} {
		out := procTable{engines: engines, metrics: metrics, links: links, styles: &st}.Render(tt.w, 3)
		for _, want := range tt.stayed {
			if !strings.Contains(out, want) {
				t.Errorf("%d columns: %q is not whole on it:\n%s", tt.w, want, out)
			}
		}
		for _, col := range tt.gone {
			if strings.Contains(out, col) {
				t.Errorf("%d columns: %q did not give way:\n%s", tt.w, col, out)
			}
		}
		if !strings.Contains(out, "decoder") || !strings.Contains(strings.Split(out, "\n")[2], "-") {
			t.Errorf("%d columns: the decoder's row has no – for its link:\n%s", tt.w, out)
		}
	}
}
