package report

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
)

// SteadyRow is one source's pulls outside every fault window of a row
// (check.Judge's): for a run without a fault (a soak), its whole run.
// report.json gives them as rows[].steady.
type SteadyRow struct {
	Source int `json:"source"`
	N      int `json:"n"`          // pulls that ended
	OK     int `json:"status_200"` // ... returned 200
	Errors int `json:"errors"`     // ... did not (or failed in transport)
	Pulled int `json:"pulled"`     // ... hit
	// HitRate is Pulled / N; null without a pull.
	HitRate  *float64 `json:"hit_rate"`
	InFlight int      `json:"in_flight"` // sent and never answered (not in N)
	P50      float64  `json:"p50_s"`
	P90      float64  `json:"p90_s"`
	P99      float64  `json:"p99_s"`
	Max      float64  `json:"max_s"`
	// TTFT is the streamed pulls' time to first token; absent when the
	// run was not streamed.
	TTFT *PercentileRow `json:"ttft,omitempty"`
}

// PercentileRow is event.Percentiles in seconds.
type PercentileRow struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_s"`
	P90 float64 `json:"p90_s"`
	P99 float64 `json:"p99_s"`
	Max float64 `json:"max_s"`
}

func percentileRow(p event.Percentiles) PercentileRow {
	return PercentileRow{N: p.N, P50: p.P50.Seconds(), P90: p.P90.Seconds(), P99: p.P99.Seconds(), Max: p.Max.Seconds()}
}

func steadyRows(v event.Verdict) []SteadyRow {
	out := make([]SteadyRow, 0, len(v.Steady))
	for _, s := range v.Steady {
		r := SteadyRow{Source: s.Source, N: s.N, OK: s.OK, Errors: s.Errors, Pulled: s.Pulled, InFlight: s.InFlight}
		if s.N > 0 {
			rate := float64(s.Pulled) / float64(s.N)
			r.HitRate = &rate
		}
		p := percentileRow(s.Latency)
		r.P50, r.P90, r.P99, r.Max = p.P50, p.P90, p.P99, p.Max
		if s.TTFT != nil {
			t := percentileRow(*s.TTFT)
			r.TTFT = &t
		}
		out = append(out, r)
	}
	return out
}

// steadyHeader is the steady-state table's header: a mode column only
// with rows of several modes, as the other tables; with streamed rows it
// has the TTFT columns too.
func steadyHeader(rows []Row) []string {
	h := append(keyHead(manyModes(rows)), "source", "pulls", "200s", "errors", "hit rate", "p50", "p90", "p99", "max", "in flight")
	if streamed(rows) {
		h = append(h, "ttft p50", "ttft p90", "ttft p99", "ttft max")
	}
	return h
}

func streamed(rows []Row) bool {
	for _, r := range rows {
		for _, s := range r.Steady {
			if s.TTFT != nil {
				return true
			}
		}
	}
	return false
}

// steadyCells is a line per row and source.
func steadyCells(rows []Row) [][]string {
	ttft, withMode := streamed(rows), manyModes(rows)
	var out [][]string
	for _, r := range rows {
		for _, s := range r.Steady {
			c := append(r.keyCells(withMode), event.SourceName(s.Source), fmt.Sprint(s.N), fmt.Sprint(s.OK), fmt.Sprint(s.Errors))
			if s.N == 0 {
				c = append(c, notApplicable, notApplicable, notApplicable, notApplicable, notApplicable)
			} else {
				c = append(c, fmt.Sprintf("%.1f%%", 100**s.HitRate), latencyCell(s.P50), latencyCell(s.P90), latencyCell(s.P99), latencyCell(s.Max))
			}
			c = append(c, fmt.Sprint(s.InFlight))
			if ttft {
				if t := s.TTFT; t != nil && t.N > 0 {
					c = append(c, latencyCell(t.P50), latencyCell(t.P90), latencyCell(t.P99), latencyCell(t.Max))
				} else {
					c = append(c, notApplicable, notApplicable, notApplicable, notApplicable)
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// latencyCell shows seconds as "27.3 ms" under a second, else "30.03 s":
// a healthy pull's tens of milliseconds read at a glance beside a hung
// one's tens of seconds.
func latencyCell(s float64) string {
	if d := time.Duration(s * float64(time.Second)); d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", s)
}

// steadyCaption says what the steady-state table of rows counts: its words
// follow what the rows are (a fault fired by key makes a window as a
// scripted one does, so only a row without any window is "all of them").
func steadyCaption(rows []Row) string {
	faulted, plain := 0, 0
	for _, r := range rows {
		if len(r.Steady) == 0 {
			continue
		}
		if r.Times != nil || len(r.Windows) > 0 {
			faulted++
		} else {
			plain++
		}
	}
	what := "Each source's pulls started outside every fault window and outside the recovery window after a window on that source (its aftermath, judged by the recovery check)"
	switch {
	case faulted == 0:
		what = "Each source's pulls, all of them (no fault window opened)"
	case plain > 0:
		what += "; for a row without a fault window, all of them"
	}
	return what + ": latency from send to the whole answer, percentiles from a bounded histogram (within 0.1 %), max exact; in flight: sent and never answered"
}

// SteadyTable is the steady-state table as aligned plain text, printed
// under the times table; "" when no row has one.
func SteadyTable(rows []Row) string { return steadyTable(rows).plain() }

// writeSteady appends report.md's steady-state table.
func writeSteady(b *strings.Builder, rows []Row) { steadyTable(rows).writeMarkdown(b) }

func steadyTable(rows []Row) table {
	return table{steadyHeader(rows), steadyCells(rows), "Steady state per source. " + steadyCaption(rows) + "."}
}
