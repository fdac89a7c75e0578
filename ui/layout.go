package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// The dashboard's layout: the screen of a one-arm run cut into its panels
// (header.go, source.go, procs.go, checks.go, windows.go, eventlog.go),
// and the helpers every panel draws its block with. Panels are dumb: each
// is handed what it shows and renders it in the size it is given; state
// and messages stay in the Model (model.go). A run of several arms is laid
// out in armsview.go, start-up in startup.go, the full-screen log in
// logview.go.

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

// dashboard lays out the header, the source panels, the process table, the
// checks (or the final verdict), the fault-by-fault windows and the event
// log in w×h.
func (m Model) dashboard(w, h int) string {
	now := m.opts.Now()
	nowT := m.st.nowT(now)
	st, s := m.st, m.styles

	head := m.header(st.run, st.ended, now, w)
	hv := m.help.View(m.footer(m.keys))
	banner := m.endBanner()
	avail := h - lipgloss.Height(head) - lipgloss.Height(hv)
	if banner != "" {
		avail--
	}
	l := m.dashLayout(w, h, avail)

	parts := []string{head}
	if l.panels > 0 {
		parts = append(parts, m.renderSources(w, l.panels, l.cols, l.rows, m.pageFirst(l), nowT))
		if l.paged {
			parts = append(parts, m.pageSummary(l, w, nowT))
		}
	}
	if l.procs > 0 {
		parts = append(parts, procTable{engines: st.engineOrder(), metrics: st.metrics, links: st.links, styles: s, most: l.procs - 1}.Render(w, l.procs))
	}
	if l.final {
		parts = append(parts, verdictTable{verdict: st.verdict, run: st.run, styles: s, cut: st.cutShort()}.Render(w, l.checks))
	} else {
		parts = append(parts, checksPanel{verdict: st.verdict, lookup: l.lookup, styles: s}.Render(w, l.checks))
	}
	if l.windows > 0 {
		parts = append(parts, m.windowsPanel().Render(w, l.windows))
	}
	if l.log > 0 {
		parts = append(parts, eventLog{entries: st.log.Last(l.log), styles: s}.Render(w, l.log))
	}
	if banner != "" {
		parts = append(parts, banner)
	}
	parts = append(parts, hv)
	// Every part is already w wide; JoinVertical would pad them all to
	// the widest line instead of clipping.
	return strings.Join(parts, "\n")
}

// endBanner is the line under a one-arm run that ended, "" before.
func (m Model) endBanner() string {
	if !m.st.ended {
		return ""
	}
	res := fmt.Sprintf("run ended: %s (exit %d) · press q to quit", orDash(m.st.endMsg), m.st.exitCode)
	style := m.styles.Pass
	if m.st.exitCode != 0 {
		style = m.styles.Fail
	}
	return style.Render(res)
}

// dashLayout is how a one-arm screen's lines are shared out: the source
// panels' grid and each part's height.
type dashLayout struct {
	cols, rows                          int
	panels, procs, checks, windows, log int
	lookup                              string // the checks panel's lookup line (lookupWindowText), "" for none
	final                               bool   // the final verdict's table in place of the live checks
	paged                               bool   // the grid shows a page of the sources (scale.go)
}

// logMin is the least the event log gets before the source panels grow.
const logMin = 3

// dashLayout fits the one-arm parts into avail lines of a w×h screen:
// the bottom sections first (they are small and fixed), then the source
// panels and the event log share the rest.
func (m Model) dashLayout(w, h, avail int) dashLayout {
	st := m.st
	l := dashLayout{final: st.final && st.verdict != nil}
	switch {
	case l.final:
		l.checks = verdictTable{verdict: st.verdict}.Height()
	case st.verdict != nil && h >= 40:
		l.checks = 1 + len(st.verdict.Checks)
		// The latest fault window's decoder lookup delay, a line of its
		// own, once the decoder exports it.
		if lw, base, ok := st.lookup.latest(st.nowT(m.opts.Now())); ok {
			l.lookup = lookupWindowText(lw, base)
			l.checks++
		}
	default:
		l.checks = 1
	}
	l.procs = 1 + max(1, min(len(st.engineOrder()), procRowsMax(avail)))
	if l.final && h < 40 {
		l.procs = 0 // the processes are gone; the verdict matters more
	}
	// A run of many fault windows: the latest windows and the per-kind
	// summary (one line, the counts, on a small terminal).
	if wp := m.windowsPanel(); wp.shown() {
		l.windows = 1
		if h >= 40 {
			l.windows = wp.Height(6)
		}
	}
	n := max(1, len(st.sources))
	l.cols = min(n, max(1, w/38))
	l.rows = (n + l.cols - 1) / l.cols
	rest := l.pageSources(avail - l.checks - l.procs - l.windows)
	l.panels = min(rest-logMin, l.rows*panelMax)
	if l.panels < l.rows*panelMin {
		l.panels = min(rest, l.rows*panelMin)
	}
	l.panels = max(l.panels, 0)
	l.log = max(rest-l.panels, 0)
	return l
}

// joinBlocks puts blocks of h lines each (every line already as wide as
// its block: block() made them) side by side, and pads each line with pad
// spaces: what lipgloss.JoinHorizontal and JoinVertical give such blocks,
// without measuring every line's width again.
func joinBlocks(blocks []string, h, pad int) string {
	lines := make([][]string, len(blocks))
	for i, b := range blocks {
		lines[i] = strings.SplitN(b, "\n", h)
	}
	tail := strings.Repeat(" ", max(pad, 0))
	var out strings.Builder
	for y := range h {
		if y > 0 {
			out.WriteByte('\n')
		}
		for _, l := range lines {
			if y < len(l) {
				out.WriteString(l[y])
			}
		}
		out.WriteString(tail)
	}
	return out.String()
}

// clip cuts the view to the window, so a small terminal never scrolls.
func clip(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if textWidth(l) > w {
			lines[i] = fit(l, w)
		}
	}
	return strings.Join(lines, "\n")
}

// blankBlock is h lines of w spaces.
func blankBlock(w, h int) string {
	if w < 0 {
		w = 0
	}
	if h <= 0 {
		return ""
	}
	line := strings.Repeat(" ", w)
	lines := make([]string, h)
	for i := range lines {
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}
