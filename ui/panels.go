package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"p2pfault/event"
)

// Panels are dumb: each is handed what it shows and renders it in the size
// it is given. State and messages stay in the Model.

// fit truncates s to w cells and pads it with spaces to exactly w.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := textWidth(s)
	if sw > w {
		s = ansi.Truncate(s, w, "…")
		sw = textWidth(s)
	}
	if pad := w - sw; pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// block makes lines exactly w wide and h tall.
func block(lines []string, w, h int) string {
	if h <= 0 {
		return ""
	}
	out := make([]string, h)
	for i := range out {
		if i < len(lines) {
			out[i] = fit(lines[i], w)
		} else {
			out[i] = fit("", w)
		}
	}
	return strings.Join(out, "\n")
}

// spread puts left and right on one line of width w, right-aligned; right
// is the less important part and is dropped when both do not fit.
func spread(left, right string, w int) string {
	gap := w - textWidth(left) - textWidth(right)
	if gap < 1 {
		return fit(left, w)
	}
	return left + strings.Repeat(" ", gap) + right
}

// latencyStats summarise the pulls of a rolling window.
type latencyStats struct {
	n             int
	p50, p95, max time.Duration
	hits          int
}

// sourcePanel is one source: badge, latency chart, rolling stats, hit-rate
// sparkline and counts.
type sourcePanel struct {
	index     int
	selected  bool
	badge     badgeKind
	badgeText string
	chart     latencyChart
	window    time.Duration
	recent    time.Duration
	stats     latencyStats
	ttft      ttftStats    // ttft.go
	inflight  inflightLine // inflight.go
	spark     []float64
	n, ok200  int64
	errs      int64
	pulled    int64
	wrong     int64 // pulls that returned other text than the source's
	styles    *Styles
}

func (p sourcePanel) Render(w, h int) string {
	s := p.styles
	inner := w - 1 // one column between panels
	if inner < 10 || h < 1 {
		return blankBlock(w, h)
	}
	name := sourceEngine(p.index)
	if p.selected {
		name = s.Selected.Render("▶ " + name)
	} else {
		name = s.Title.Render("  " + name)
	}
	left := name + "  " + s.badge(p.badge).Render(p.badgeText)
	right := "latency, last " + fmtSpan(p.window)
	if textWidth(left)+len(right)+1 > inner {
		right = "last " + fmtSpan(p.window)
	}
	title := spread(left, s.Dim.Render(right), inner)

	st := p.stats
	var stats string
	if st.n == 0 {
		stats = s.Dim.Render("no pulls in the last " + fmtSpan(p.recent))
	} else {
		stats = fmt.Sprintf("%s %s  %s %s  %s %s",
			s.Label.Render("p50"), fmtLatency(st.p50),
			s.Label.Render("p95"), fmtLatency(st.p95),
			s.Label.Render("max"), fmtLatency(st.max))
		if suffix := "  " + s.Dim.Render("last "+fmtSpan(p.recent)); textWidth(stats+suffix) <= inner {
			stats += suffix
		}
	}
	hitLabel := s.Label.Render("hits") + " "
	var rate string
	if st.n == 0 {
		rate = "  - "
	} else {
		rate = fmt.Sprintf("%4s", fmtPercent(float64(st.hits)/float64(st.n)))
	}
	hits := hitLabel + rate + " " + hitSparkline(p.spark, s)
	if p.wrong > 0 {
		// Beside the hits: a hit that answered the wrong text. Only once
		// there is one, so a run of right answers reads as before.
		hits += "  " + s.Fail.Render(fmt.Sprintf("wrong %d", p.wrong))
	}
	counts := fmt.Sprintf("%s %d  %s %d  %s %d  %s %d",
		s.Label.Render("n"), p.n, s.Label.Render("200s"), p.ok200,
		s.Label.Render("errors"), p.errs, s.Label.Render("pulled"), p.pulled)

	// The chart takes what the four text lines leave; below four rows it
	// cannot show an axis and a line, so it goes first.
	ttft := append(p.inflight.lines(s), p.ttft.lines(s)...)
	lines := []string{title}
	chartH := h - 4 - len(ttft)
	if chartH >= 4 {
		lines = append(lines, strings.Split(p.chart.Render(inner, chartH), "\n")...)
	}
	lines = append(append(append(lines, stats), ttft...), hits, counts)
	if len(lines) > h {
		lines = lines[:h]
	}
	return block(lines, w, h)
}

// procTable lists every engine process.
type procTable struct {
	engines []*engineState
	metrics map[string]event.MetricsInfo // latest /metrics per engine (metrics.go); none: no columns
	styles  *Styles
}

func (t procTable) Render(w, h int) string {
	s := t.styles
	if h <= 0 {
		return ""
	}
	head := []string{"ENGINE", "ROLE", "PID", "SID", "MEMBERS", "STATE", "HTTP/P2P", "UPTIME", "RESTARTS"}
	// Attached engines (run --attach) add what p2pfault knows of the ones
	// it cannot see in /proc: their URL and what /health said.
	attached := false
	for _, e := range t.engines {
		attached = attached || e.info.URL != ""
	}
	if attached {
		head = append(head, "URL", "/HEALTH")
	}
	scraped := len(t.metrics) > 0
	if scraped {
		head = append(head, metricsHead...)
	}
	rows := [][]string{head}
	for _, e := range t.engines {
		i := e.info
		state := string(i.State)
		if i.Exit != "" && i.State == event.StateExited {
			state += " (" + i.Exit + ")"
		}
		row := []string{
			i.Name, orDash(string(i.Role)), pidOrDash(i.Pid), pidOrDash(i.Sid), orDash(fmtPids(i.Members)), orDash(state),
			fmt.Sprintf("%d/%d", i.HTTPPort, i.P2PPort), fmtUptime(i.Uptime), strconv.Itoa(i.Restarts),
		}
		if attached {
			row = append(row, orDash(i.URL), orDash(i.Health))
		}
		if scraped {
			m, ok := t.metrics[i.Name]
			row = append(row, metricsCells(m, ok)...)
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(head))
	for _, r := range rows {
		for c, cell := range r {
			widths[c] = max(widths[c], textWidth(cell))
		}
	}
	// MEMBERS is the column that can grow without bound: it gives way.
	const members = 4
	total := 2 * (len(widths) - 1)
	for _, cw := range widths {
		total += cw
	}
	if over := total - w; over > 0 {
		widths[members] = max(len("MEMBERS"), widths[members]-over)
	}
	var lines []string
	for ri, r := range rows {
		var b strings.Builder
		for c, cell := range r {
			cell = fit(cell, widths[c])
			switch {
			case ri == 0:
				cell = s.Dim.Render(cell)
			case c == 5:
				cell = s.badge(engineBadge(t.engines[ri-1].info.State)).Render(cell)
			}
			if c > 0 {
				b.WriteString("  ")
			}
			b.WriteString(cell)
		}
		lines = append(lines, b.String())
	}
	if len(t.engines) == 0 {
		lines = append(lines, s.Dim.Render("no engine has reported yet"))
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	return block(lines, w, h)
}

func pidOrDash(p int) string {
	if p <= 0 {
		return "-"
	}
	return strconv.Itoa(p)
}

// engineBadge maps a process state to the badge colours.
func engineBadge(state event.State) badgeKind {
	switch state {
	case event.StateReady:
		return badgeReady
	case event.StateStopped:
		return badgeStalled
	case event.StateExited:
		return badgeKilled
	case event.StateRestarting:
		return badgeRestarting
	case event.StateRemoved:
		return badgeRemoved
	default:
		return badgeStarting
	}
}

// eventLog shows the newest entries that fit, oldest first.
type eventLog struct {
	entries []logEntry
	styles  *Styles
}

func (l eventLog) Render(w, h int) string {
	s := l.styles
	if h <= 0 {
		return ""
	}
	lines := []string{s.Section.Render("events")}
	n := h - 1
	start := max(0, len(l.entries)-n)
	for _, e := range l.entries[start:] {
		lines = append(lines, s.Dim.Render(fmt.Sprintf("%-9s", fmtRunTime(e.at)))+" "+s.level(e.level).Render(e.text))
	}
	return block(lines, w, h)
}

// checksPanel shows each check's live verdict; one line when space is short.
type checksPanel struct {
	verdict *event.Verdict
	styles  *Styles
}

func checkMark(s *Styles, r event.Result) string {
	switch {
	case r.Empty:
		return s.Dim.Render("·")
	case r.Passed:
		return s.Pass.Render("✓")
	default:
		return s.Fail.Render("✗")
	}
}

func (c checksPanel) Render(w, h int) string {
	s := c.styles
	if h <= 0 {
		return ""
	}
	if c.verdict == nil {
		return block([]string{s.Section.Render("checks") + " " + s.Dim.Render("no verdict yet")}, w, h)
	}
	if h == 1 {
		var b strings.Builder
		b.WriteString(s.Section.Render("checks (live)") + timesSuffix(s, c.verdict))
		for _, r := range c.verdict.Checks {
			b.WriteString("  " + checkMark(s, r) + " " + r.Name)
		}
		return block([]string{b.String()}, w, h)
	}
	lines := []string{s.Section.Render("checks (live)") + timesSuffix(s, c.verdict)}
	nameW := 0
	for _, r := range c.verdict.Checks {
		nameW = max(nameW, len(r.Name))
	}
	for _, r := range c.verdict.Checks {
		lines = append(lines, checkMark(s, r)+" "+fit(r.Name, nameW)+"  "+s.Dim.Render(r.Detail))
	}
	return block(lines, w, h)
}

// verdictTable is the end of a scripted run: each check and the figures of
// the seed's table.
type verdictTable struct {
	verdict *event.Verdict
	run     *event.RunInfo
	styles  *Styles
}

// Height is how many lines the table wants.
func (v verdictTable) Height() int {
	h := 1 + len(v.verdict.Checks)
	if v.faulted() {
		h += 3
	}
	if v.verdict.Times != nil {
		h++
	}
	if n := len(v.verdict.Steady); n > 0 {
		h += 2 + n // title, header, a line per source
	}
	return h
}

// faulted says the verdict judged a fault window: it has the seed's
// figures (faulted, healthy, recovery) to show.
func (v verdictTable) faulted() bool {
	return v.verdict.Times != nil || v.verdict.Summary != (event.Summary{})
}

// timesSuffix is the live checks' title's detect and recover times.
func timesSuffix(s *Styles, v *event.Verdict) string {
	if v == nil || v.Times == nil {
		return ""
	}
	return "  " + s.Dim.Render(timesLine(v.Times))
}

func (v verdictTable) Render(w, h int) string {
	s := v.styles
	res := s.Pass.Render("PASS")
	if !v.verdict.Passed {
		res = s.Fail.Render("FAIL")
	}
	title := s.Section.Render("verdict") + " " + res
	if v.run != nil {
		title += s.Dim.Render(" · arm " + orDash(v.run.Arm) + " · case " + orDash(v.run.Case))
	}
	lines := []string{title}
	nameW := 0
	for _, r := range v.verdict.Checks {
		nameW = max(nameW, len(r.Name))
	}
	for _, r := range v.verdict.Checks {
		word := s.Pass.Render("pass")
		switch {
		case r.Empty:
			word = s.Dim.Render("empty")
		case !r.Passed:
			word = s.Fail.Render("FAIL")
		}
		lines = append(lines, "  "+checkMark(s, r)+" "+fit(r.Name, nameW)+"  "+fit(word, 5)+"  "+r.Detail)
	}
	if sum := v.verdict.Summary; v.faulted() {
		lines = append(lines,
			fmt.Sprintf("  %s n %d  pulled %d  p50 %s  max %s", s.Label.Render("faulted "), sum.Faulted.N, sum.Faulted.Pulled, fmtSeconds(sum.Faulted.P50), fmtSeconds(sum.Faulted.Max)),
			fmt.Sprintf("  %s n %d  pulled %d  max %s", s.Label.Render("healthy "), sum.Healthy.N, sum.Healthy.Pulled, fmtSeconds(sum.Healthy.Max)),
			fmt.Sprintf("  %s n %d  pulled %d", s.Label.Render("recovery"), sum.Recovery.N, sum.Recovery.Pulled),
		)
	}
	if t := v.verdict.Times; t != nil {
		lines = append(lines, "  "+s.Label.Render("times   ")+" "+timesLine(t))
	}
	lines = append(lines, steadyLines(s, v.verdict)...)
	if len(lines) > h {
		lines = lines[:h]
	}
	return block(lines, w, h)
}

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
	replay   string // a replay's mark and position (replay.go)
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
	if v.replay != "" {
		title += "  " + v.replay
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
			state = s.badge(engineBadge(e.info.State)).Render(fmt.Sprintf("%-10s", e.info.State))
			detail = fmt.Sprintf("pid %-7s http :%d  p2p :%d  up %s", pidOrDash(e.info.Pid), e.info.HTTPPort, e.info.P2PPort, fmtUptime(e.info.Uptime))
			if e.info.Exit != "" {
				detail += "  " + s.Err.Render(e.info.Exit)
			}
		}
		lines = append(lines, fmt.Sprintf("  %-10s %s %s", e.name, state, detail))
	}
	rest := h - len(lines) - 1
	if v.failed {
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
	} else if len(v.recent) > 0 && rest >= 3 {
		lines = append(lines, "", s.Section.Render("recent"))
		rest -= 2
		rec := v.recent
		if len(rec) > rest {
			rec = rec[len(rec)-rest:]
		}
		for _, e := range rec {
			lines = append(lines, "  "+s.level(e.level).Render(e.text))
		}
	}
	return block(lines, w, h)
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
