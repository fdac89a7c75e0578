package ui

import (
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
)

// steadyLines is the final verdict's steady-state summary (check.Judge's):
// a title and a line per source with its pulls, 200s, errors, hit rate,
// latency percentiles and, when streamed, TTFT. A soak (a run without a
// fault) has nothing else to show, and a fault run's pulls outside its
// windows are the baseline its faults are read against.
func steadyLines(s *Styles, v *event.Verdict) []string {
	if len(v.Steady) == 0 {
		return nil
	}
	what := "pulls outside the fault windows and their recovery windows"
	if v.Times == nil {
		what = "every pull of the run"
	}
	ttft := false
	for _, src := range v.Steady {
		ttft = ttft || (src.TTFT != nil && src.TTFT.N > 0)
	}
	head := []string{"SOURCE", "PULLS", "200S", "ERRORS", "HIT", "P50", "P90", "P99", "MAX", "IN FLIGHT"}
	if ttft {
		head = append(head, "TTFT P50", "P99", "MAX")
	}
	rows := [][]string{head}
	for _, src := range v.Steady {
		row := []string{event.SourceName(src.Source), strconv.Itoa(src.N), strconv.Itoa(src.OK), strconv.Itoa(src.Errors)}
		if src.N > 0 {
			l := src.Latency
			row = append(row, fmtPercent(float64(src.Pulled)/float64(src.N)), fmtQuantile(l.P50), fmtQuantile(l.P90), fmtQuantile(l.P99), fmtQuantile(l.Max))
		} else {
			row = append(row, "–", "–", "–", "–", "–")
		}
		row = append(row, strconv.Itoa(src.InFlight))
		if ttft {
			if t := src.TTFT; t != nil && t.N > 0 {
				row = append(row, fmtQuantile(t.P50), fmtQuantile(t.P99), fmtQuantile(t.Max))
			} else {
				row = append(row, "–", "–", "–")
			}
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(head))
	for _, r := range rows {
		for c, cell := range r {
			widths[c] = max(widths[c], textWidth(cell))
		}
	}
	lines := []string{"  " + s.Label.Render("steady  ") + " " + s.Dim.Render(what)}
	for i, r := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for c, cell := range r {
			if c > 0 {
				b.WriteString("  ")
			}
			b.WriteString(cell + strings.Repeat(" ", widths[c]-textWidth(cell)))
		}
		line := strings.TrimRight(b.String(), " ")
		if i == 0 {
			line = s.Dim.Render(line)
		}
		lines = append(lines, line)
	}
	return lines
}

// fmtQuantile prints a latency percentile: milliseconds under a second
// (a healthy pull's 27.3ms is lost in "0.03s"), else as fmtLatency.
func fmtQuantile(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return fmtLatency(d)
}
