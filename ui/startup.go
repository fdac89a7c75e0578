package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"

	"p2pfault/event"
)

// startupView is the screen while engines come up, and the reason when
// they did not.
type startupView struct {
	run      *event.RunInfo
	engines  []startupEngine
	spinner  string
	failed   bool
	failures []string
	ended    bool
	exitCode int
	tails    []engineTail
	recent   []logEntry
	mark     string // a replay's mark and position (replay.go)
	styles   *Styles
}

type startupEngine struct {
	name  string
	info  *event.EngineInfo
	ready bool
}

type engineTail struct {
	engine string
	lines  []string
}

func (v startupView) Render(w, h int) string {
	s := v.styles
	title := s.Title.Render("p2pfault")
	if v.mark != "" {
		title += "  " + v.mark
	}
	if v.run != nil {
		title += fmt.Sprintf("  case %s · arm %s · %d sources on %s", orDash(v.run.Case), orDash(v.run.Arm), v.run.Sources, orDash(v.run.Engine))
	}
	lines := []string{title, ""}
	switch {
	case v.failed && v.ended:
		lines = append(lines, s.Fail.Render("✗ the cluster did not come up"))
	case v.failed:
		lines = append(lines, strings.TrimSpace(v.spinner)+" starting engines… "+s.Warn.Render("⚠ trouble while starting"))
	default:
		lines = append(lines, strings.TrimSpace(v.spinner)+" starting engines…")
	}
	if v.failed {
		for _, f := range v.failures {
			lines = append(lines, "  "+s.Err.Render(f))
		}
	}
	if v.ended {
		lines = append(lines, s.Dim.Render(fmt.Sprintf("  the run ended (exit %d) · press q to quit", v.exitCode)))
	}
	lines = append(lines, "")
	for _, e := range v.engines {
		state, detail := s.Dim.Render("waiting"), ""
		if e.info != nil {
			state = s.badge(engineBadge(*e.info)).Render(fmt.Sprintf("%-10s", e.info.StateText()))
			detail = fmt.Sprintf("pid %-7s http :%d  p2p :%d  up %s", pidOrDash(e.info.Pid), e.info.HTTPPort, e.info.P2PPort, fmtUptime(e.info.Uptime))
			if e.info.Exit != "" {
				detail += "  " + s.Err.Render(e.info.Exit)
			}
		}
		lines = append(lines, fmt.Sprintf("  %-10s %s %s", e.name, state, detail))
	}
	rest := h - len(lines) - 1
	if v.failed {
		lines = append(lines, v.tailLines(rest)...)
	} else {
		lines = append(lines, v.recentLines(rest)...)
	}
	return block(lines, w, h)
}

// tailLines are the failed engines' last log lines, in at most rest lines.
func (v startupView) tailLines(rest int) []string {
	s := v.styles
	var lines []string
	for _, t := range v.tails {
		if rest < 3 {
			break
		}
		lines = append(lines, "", s.Section.Render("last log lines of "+t.engine))
		rest -= 2
		ls := t.lines
		if len(ls) > rest {
			ls = ls[len(ls)-rest:]
		}
		if len(ls) == 0 {
			lines = append(lines, s.Dim.Render("  (no output)"))
			rest--
		}
		for _, l := range ls {
			lines = append(lines, "  "+l)
		}
		rest -= len(ls)
	}
	return lines
}

// recentLines are the latest entries of the event log, in at most rest
// lines; none when fewer than three fit.
func (v startupView) recentLines(rest int) []string {
	if len(v.recent) == 0 || rest < 3 {
		return nil
	}
	s := v.styles
	lines := []string{"", s.Section.Render("recent")}
	rest -= 2
	rec := v.recent
	if len(rec) > rest {
		rec = rec[len(rec)-rest:]
	}
	for _, e := range rec {
		lines = append(lines, "  "+s.level(e.level).Render(e.text))
	}
	return lines
}

func (m Model) startupView(w, h int) string {
	hv := m.help.View(m.footer(startupKeys{m.keys}))
	hh := lipgloss.Height(hv)
	tails := m.failTails
	if len(tails) == 0 && m.st.startFailed {
		// Until LogTail answers, show the lines the run's log events carried.
		for _, e := range m.failedEngines() {
			if es, ok := m.st.engines[e]; ok {
				tails = append(tails, engineTail{engine: e, lines: es.logs.Last(12)})
			}
		}
	}
	v := startupView{
		run:      m.st.run,
		engines:  m.startupEngines(),
		spinner:  m.spinner.View(),
		failed:   m.st.startFailed,
		failures: m.st.failures,
		ended:    m.st.ended,
		exitCode: m.st.exitCode,
		mark:     m.mark,
		tails:    tails,
		recent:   m.st.log.Last(8),
		styles:   m.styles,
	}
	return v.Render(w, h-hh) + "\n" + hv
}

// startupEngines lists the engines the run needs (from RunInfo) and any
// others that reported, in process-table order.
func (m Model) startupEngines() []startupEngine {
	seen := map[string]bool{}
	var out []startupEngine
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		se := startupEngine{name: name}
		if e, ok := m.st.engines[name]; ok && e.reported {
			info := e.info
			se.info, se.ready = &info, e.everReady
		}
		out = append(out, se)
	}
	if m.st.run != nil {
		for i := 0; i < m.st.run.Sources && i < maxSources; i++ {
			add(event.SourceName(i))
		}
		add("decoder")
	}
	for _, e := range m.st.engineOrder() {
		add(e.info.Name)
	}
	return out
}

// failedEngines are the engines whose logs explain a failed start-up: those
// not ready, or every engine when all reported ready.
func (m Model) failedEngines() []string {
	var names []string
	for _, e := range m.startupEngines() {
		if !e.ready {
			names = append(names, e.name)
		}
	}
	if len(names) == 0 {
		for _, e := range m.startupEngines() {
			names = append(names, e.name)
		}
	}
	return names
}

// failStage is how far a start-up failure went: 0 none, 1 a warning
// before the cluster was up, 2 the run ended before it was up.
func (m Model) failStage() int {
	switch {
	case !m.st.startFailed:
		return 0
	case m.st.ended:
		return 2
	default:
		return 1
	}
}

// startupKeys are the bindings in force while engines come up: faults
// need a cluster.
type startupKeys struct{ k KeyMap }

func (s startupKeys) ShortHelp() []key.Binding { return []key.Binding{s.k.Log, s.k.Quit} }

func (s startupKeys) FullHelp() [][]key.Binding { return [][]key.Binding{s.ShortHelp()} }
