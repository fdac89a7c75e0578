package ui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
)

// scaleModel is a dashboard of 64 sources and 8 decoders (--decoders 8)
// after run of pulls every 500 ms per source, at 160×48.
func scaleModel(tb testing.TB, run time.Duration) Model {
	tb.Helper()
	m := simulate(tb, newBenchModel(run), 64, 500*time.Millisecond, run)
	var evs []event.Event
	for d := range 8 {
		info := engineInfo(event.DecoderName(d, 8), d, event.StateReady, 5000+10*d, run)
		info.Role = event.RoleDecoder
		evs = append(evs, event.Event{Kind: event.KindEngine, T: run, Wall: wallAt(run), Engine: info})
	}
	m = update(tb, m, eventsMsg{events: evs})
	return update(tb, m, tea.WindowSizeMsg{Width: 160, Height: 48})
}

// TestTheDashboardAt64SourcesLeavesRoomForChecksAndEvents: 64 sources and
// 8 decoders on 160×48 (issue #41: the process table alone filled the
// screen). The frame is 48 lines; the process table lists the decoders
// and sums up the rest in a line; the source panels are a page, summed
// up in a line, that follows the selection; the checks and the event log
// are on screen.
func TestTheDashboardAt64SourcesLeavesRoomForChecksAndEvents(t *testing.T) {
	m := scaleModel(t, 2*time.Minute)
	v := m.View()
	if n := strings.Count(v, "\n") + 1; n != 48 {
		t.Errorf("frame of %d lines, want 48", n)
	}
	for _, want := range []string{"checks", "events", "sources 0-11 of 64 shown", "the other 52: 52 ready", "decoder-0", "more engines:", "ready"} {
		if !strings.Contains(v, want) {
			t.Errorf("frame lacks %q:\n%s", want, v)
		}
	}
	if strings.Count(v, "\nsource-") > 8 {
		t.Errorf("the process table lists more than 8 sources:\n%s", v)
	}
	for range 13 {
		m = update(t, m, tea.KeyMsg{Type: tea.KeyTab})
	}
	if v := m.View(); !strings.Contains(v, "sources 12-23 of 64 shown") || !strings.Contains(v, "source-13") || strings.Contains(v, "source-0 ") {
		t.Errorf("after 13 tabs the page is not source-13's:\n%s", v)
	}
}

// BenchmarkViewAtScale is one frame at 160×48 with 64 sources and 8
// decoders (72 engines) after ten minutes of a pull every 500 ms per
// source (issue #41: under 2 ms).
func BenchmarkViewAtScale(b *testing.B) {
	m := scaleModel(b, 10*time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = m.View()
	}
}
