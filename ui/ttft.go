package ui

import (
	"fmt"
	"slices"
	"time"
)

// ttftStats is the time to first token of a source's streamed pulls (run
// --stream) that ended in the rolling window.
type ttftStats struct {
	streamed bool // some pull still held had a TTFT: the run streams
	n        int
	p50, max time.Duration
}

// ttftOf summarises the TTFT of points ending in (from, to].
func ttftOf(points *ring[point], from, to time.Duration) ttftStats {
	var st ttftStats
	var d []time.Duration
	for j := 0; j < points.Len(); j++ {
		p := points.At(j)
		if p.ttft <= 0 {
			continue
		}
		st.streamed = true
		if p.end > from && p.end <= to {
			d = append(d, p.ttft)
		}
	}
	if st.n = len(d); st.n > 0 {
		slices.Sort(d)
		st.p50 = nearestRank(d, 0.50)
		st.max = d[len(d)-1]
	}
	return st
}

// lines is the panel's TTFT line: none for a run that does not stream.
func (t ttftStats) lines(s *Styles) []string {
	if !t.streamed {
		return nil
	}
	if t.n == 0 {
		return []string{s.Label.Render("ttft") + " " + s.Dim.Render("no token in the window")}
	}
	return []string{fmt.Sprintf("%s %s  %s %s", s.Label.Render("ttft p50"), fmtLatency(t.p50), s.Label.Render("max"), fmtLatency(t.max))}
}
