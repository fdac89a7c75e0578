package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// logTailLines is how many lines the full-screen log asks for.
const logTailLines = 500

// logScreen is the full-screen log of m.logEngine and its keys in w×h.
func (m Model) logScreen(w, h int) string {
	hv := m.help.View(logKeys{m.keys})
	body := logView{engine: m.logEngine, lines: m.logLines, styles: m.styles}.Render(w, h-lipgloss.Height(hv))
	return body + "\n" + hv
}

// logView is an engine's log, full screen.
type logView struct {
	engine string
	lines  []string
	styles *Styles
}

func (v logView) Render(w, h int) string {
	s := v.styles
	title := s.Title.Render("log: "+v.engine) + s.Dim.Render(fmt.Sprintf("  (last %d lines)", len(v.lines)))
	lines := []string{title}
	body := h - 1
	if len(v.lines) == 0 {
		lines = append(lines, s.Dim.Render("no output yet"))
	}
	// Long lines (vLLM's stats line is ~250 columns) wrap, indented, rather
	// than lose their end: the newest lines that fit are shown whole.
	var rows []string
	for i := len(v.lines) - 1; i >= 0 && len(rows) < body; i-- {
		rows = append(wrapLine(v.lines[i], w), rows...)
	}
	if len(rows) > body {
		rows = rows[len(rows)-body:]
	}
	lines = append(lines, rows...)
	return block(lines, w, h)
}

// logIndent marks a wrapped line's continuation rows.
const logIndent = "  "

// wrapLine breaks line into rows of at most w cells, at spaces where it
// can; rows after the first are indented.
func wrapLine(line string, w int) []string {
	if w <= len(logIndent)+1 || ansi.StringWidth(line) <= w {
		return []string{line}
	}
	first := ansi.Wrap(line, w, "")
	rows := strings.Split(first, "\n")
	if len(rows) == 1 {
		return rows
	}
	rest := strings.Join(rows[1:], " ")
	out := []string{rows[0]}
	for _, r := range strings.Split(ansi.Wrap(rest, w-len(logIndent), ""), "\n") {
		out = append(out, logIndent+r)
	}
	return out
}

// nextEngine cycles the full-screen log through every known engine.
func (m Model) nextEngine(cur string) string {
	var names []string
	for _, e := range m.st.engineOrder() {
		names = append(names, e.info.Name)
	}
	return cycleNext(names, cur)
}

// cycleNext is the name after cur in names, the first after the last (or
// when cur is not among them), cur when there is none.
func cycleNext(names []string, cur string) string {
	if len(names) == 0 {
		return cur
	}
	for i, n := range names {
		if n == cur {
			return names[(i+1)%len(names)]
		}
	}
	return names[0]
}

// logKeys are the bindings in force in the full-screen log.
type logKeys struct{ k KeyMap }

func (l logKeys) ShortHelp() []key.Binding {
	next := l.k.Next
	next.SetHelp("tab", "next engine")
	return []key.Binding{l.k.Back, next, l.k.Quit}
}

func (l logKeys) FullHelp() [][]key.Binding { return [][]key.Binding{l.ShortHelp()} }

// logKey handles a key in the full-screen log: back to the dashboard, or
// the next engine's log.
func (m Model) logKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k := m.keys; {
	case key.Matches(msg, k.Back), key.Matches(msg, k.Log):
		m.mode, m.logLines = modeDashboard, nil
	case key.Matches(msg, k.Next):
		return m.openLog(m.nextEngine(m.logEngine))
	}
	return m, nil
}

// openLog shows engine's log full screen and asks for its last lines.
func (m Model) openLog(engine string) (Model, tea.Cmd) {
	m.mode, m.logEngine, m.logLines = modeLog, engine, nil
	if m.ctrl == nil {
		return m, nil
	}
	return m, fetchLogTail(m.ctrl, m.logEngine, logTailLines)
}
