package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
)

// steadyLines is the final verdict's steady-state summary (check.Steady):
// a title and a line per source with its pulls, 200s, errors, hit rate,
// latency percentiles and, when streamed, TTFT. A soak (a run without a
// fault) has nothing else to show, and a fault run's pulls outside its
// windows are the baseline its faults are read against.
func steadyLines(s *Styles, v *event.Verdict) []string {
	if len(v.Steady) == 0 {
		return nil
	}
	what := "pulls outside the fault windows"
	if v.Times == nil {
		what = "every pull of the run"
	}
	lines := []string{"  " + s.Label.Render("steady  ") + " " + s.Dim.Render(what)}
	for _, src := range v.Steady {
		var b strings.Builder
		fmt.Fprintf(&b, "    %s  n %d  200s %d  errors %d", sourceEngine(src.Source), src.N, src.OK, src.Errors)
		if src.N > 0 {
			fmt.Fprintf(&b, "  hit %s  p50 %s  p90 %s  p99 %s  max %s",
				strconv.FormatFloat(100*float64(src.Pulled)/float64(src.N), 'f', 1, 64)+"%",
				fmtQuantile(src.Latency.P50), fmtQuantile(src.Latency.P90), fmtQuantile(src.Latency.P99), fmtQuantile(src.Latency.Max))
		}
		if t := src.TTFT; t != nil && t.N > 0 {
			fmt.Fprintf(&b, "  ttft p50 %s  p99 %s  max %s", fmtQuantile(t.P50), fmtQuantile(t.P99), fmtQuantile(t.Max))
		}
		if src.InFlight > 0 {
			fmt.Fprintf(&b, "  in flight %d", src.InFlight)
		}
		lines = append(lines, b.String())
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
