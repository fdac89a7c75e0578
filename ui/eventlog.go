package ui

import "fmt"

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
