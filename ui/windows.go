package ui

import (
	"fmt"
	"slices"
	"strings"

	"p2pfault/check"
	"p2pfault/event"
)

// maxWindowRows bounds the windows the dashboard keeps: a soak of hours
// fires hundreds; the panel shows the latest and the per-kind summary
// counts them all.
const maxWindowRows = 256

// applyWindowVerdict folds a window's verdict (a settled one's event, or a live
// verdict's) into the state's rows, by index; the oldest go once there
// are more than maxWindowRows.
func (st *state) applyWindowVerdict(w event.WindowVerdict) {
	i, found := slices.BinarySearchFunc(st.windows, w.Index, func(a event.WindowVerdict, idx int) int { return a.Index - idx })
	if found {
		st.windows[i] = w
		return
	}
	st.windows = slices.Insert(st.windows, i, w)
	if n := len(st.windows); n > maxWindowRows {
		st.windows = slices.Delete(st.windows, 0, n-maxWindowRows)
	}
}

// applySettled is a window_verdict event: the row, and a line in the log.
func (st *state) applySettled(ev event.Event) {
	w := ev.WindowVerdict
	if w == nil {
		return
	}
	st.applyWindowVerdict(*w)
	if w.Passed {
		st.addLog(ev.T, levelInfo, "window %d (%s %s): pass", w.Index, w.Kind, event.SourceName(w.Source))
		return
	}
	if w.NotJudged != "" {
		st.addLog(ev.T, levelWarn, "window %d (%s %s): not judged: %s", w.Index, w.Kind, event.SourceName(w.Source), w.NotJudged)
		return
	}
	var failed []string
	for _, c := range w.Checks {
		if !c.Passed {
			failed = append(failed, c.Name)
		}
	}
	st.addLog(ev.T, levelError, "window %d (%s %s): FAIL (%s)", w.Index, w.Kind, event.SourceName(w.Source), strings.Join(failed, ", "))
}

// windowsPanel is a run of many fault windows judged fault by fault: a
// line per window (the latest that fit) with its checks and times, and
// the per-kind summary.
type windowsPanel struct {
	windows []event.WindowVerdict
	kinds   []event.KindSummary
	styles  *Styles
}

// windowsPanel is the panel over the state shown.
func (m Model) windowsPanel() windowsPanel {
	return windowsPanel{windows: m.st.windows, kinds: m.st.kinds, styles: m.styles}
}

// shown says whether the run has a per-window table: more than one window.
func (p windowsPanel) shown() bool {
	return len(p.windows) > 1 || len(p.kinds) > 0 && p.kinds[0].Count > 1
}

// Height is the lines the panel wants with room for rows windows.
func (p windowsPanel) Height(rows int) int {
	if !p.shown() {
		return 0
	}
	return 1 + min(rows, len(p.windows)) + len(p.kinds)
}

func (p windowsPanel) Render(w, h int) string {
	s := p.styles
	if h <= 0 || !p.shown() {
		return ""
	}
	passed, failed := 0, 0
	for _, k := range p.kinds {
		passed += k.Passed
		failed += k.Failed
	}
	title := s.Section.Render("fault by fault") + " " + s.Dim.Render(fmt.Sprintf("%d windows: %d pass, %d FAIL", passed+failed, passed, failed))
	lines := []string{title}
	rows := max(h-1-len(p.kinds), 0)
	if h == 1 {
		rows = 0
	}
	first := max(len(p.windows)-rows, 0)
	for _, win := range p.windows[first:] {
		res := s.Pass.Render("pass")
		switch {
		case win.NotJudged != "":
			res = s.Dim.Render("n/j") // not judged: its source had stopped hitting
		case !win.Passed:
			res = s.Fail.Render("FAIL")
		}
		open := ""
		if win.End == 0 {
			open = "+"
		}
		line := fmt.Sprintf("  #%-3d %-9s %-9s at %-8s %-7s %s ", win.Index, fit(win.Kind, 9), event.SourceName(win.Source),
			fmtRunTime(win.Start), fmtLatency(max(win.End-win.Start, 0))+open, fit(res, 4))
		for _, c := range check.WindowColumns {
			mark := s.Dim.Render("–")
			for _, r := range win.Checks {
				if r.Name == c.Name {
					mark = checkMark(s, r)
				}
			}
			line += " " + mark + " " + c.Head
		}
		line += "  " + s.Dim.Render(timesLine(&win.Times))
		lines = append(lines, line)
	}
	if h > 1 {
		for _, k := range p.kinds {
			lines = append(lines, "  "+s.Label.Render(fit(k.Kind, 9))+" "+fmt.Sprintf("%d windows, %d pass, %d FAIL", k.Count, k.Passed, k.Failed)+
				s.Dim.Render(fmt.Sprintf("  worst detect %s recover %s", worstTime(k.WorstDetectS, k.NotDetected), worstTime(k.WorstRecoverS, k.NotRecovered))))
		}
	}
	return block(lines, w, h)
}

// worstTime is a kind's worst time: "–" ×N when windows never got one.
func worstTime(t *float64, never int) string {
	if never > 0 {
		return fmt.Sprintf("– ×%d", never)
	}
	return check.FormatSeconds(t)
}
