package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
)

// feed builds a dashboard at size w×h, pins its clock at the scene's now
// and folds the scene's events in, as the live feed would.
func feed(t testing.TB, sc scene, w, h int) Model {
	t.Helper()
	m := New(sc.ctrl, nil, Options{
		Now:      func() time.Time { return wallAt(sc.now) },
		Renderer: asciiRenderer(),
	})
	m = update(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	sc.ctrl.see(sc.events...)
	return update(t, m, eventsMsg{events: sc.events})
}

func update(t testing.TB, m Model, msg tea.Msg) Model {
	t.Helper()
	next, _ := m.Update(msg)
	nm, ok := next.(Model)
	if !ok {
		t.Fatalf("Update returned %T, want ui.Model", next)
	}
	return nm
}

func TestViewsMatchGolden(t *testing.T) {
	scenes := []struct {
		name  string
		scene func() scene
		// prepare runs the commands a live program would have run.
		prepare func(testing.TB, Model) Model
	}{
		{name: "startup", scene: sceneStartup},
		{name: "startup_failed", scene: sceneStartupFailed, prepare: func(t testing.TB, m Model) Model {
			return update(t, m, fetchFailTails(m.ctrl, m.failedEngines(), 12)())
		}},
		{name: "steady", scene: sceneSteady},
		{name: "stalled_source", scene: sceneStalled},
		{name: "killed_source", scene: func() scene { return sceneKilled(false) }},
		{name: "restarting_source", scene: func() scene { return sceneKilled(true) }},
		{name: "removed_source", scene: sceneRemoved},
		{name: "failed_checks", scene: sceneFailedChecks},
		{name: "timeline_first_fault", scene: sceneTimeline},
		{name: "full_help", scene: sceneSteady, prepare: func(t testing.TB, m Model) Model {
			return update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("?")})
		}},
	}
	sizes := []struct{ w, h int }{{80, 24}, {160, 48}}
	for _, sc := range scenes {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s_%dx%d", sc.name, size.w, size.h), func(t *testing.T) {
				m := feed(t, sc.scene(), size.w, size.h)
				if sc.prepare != nil {
					m = sc.prepare(t, m)
				}
				out := m.View()
				assertFits(t, out, size.w, size.h)
				golden.RequireEqual(t, []byte(out))
			})
		}
	}
}

// assertFits checks the view never spills out of the window.
func assertFits(t *testing.T, out string, w, h int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if len(lines) > h {
		t.Errorf("view is %d lines, window is %d", len(lines), h)
	}
	for i, l := range lines {
		if lw := lipgloss.Width(l); lw > w {
			t.Errorf("line %d is %d cells wide, window is %d: %q", i+1, lw, w, l)
		}
	}
}
