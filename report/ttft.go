package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/check"
)

// TTFTRow is the time to first token of a streamed run's pulls naming one
// source (run --stream): over the whole run, and over those started in the
// fault window. Only pulls that got a token count.
type TTFTRow struct {
	Source    int     `json:"source"`
	N         int     `json:"n"`
	P50       float64 `json:"p50_s"`
	Max       float64 `json:"max_s"`
	WindowN   int     `json:"window_n"`
	WindowP50 float64 `json:"window_p50_s"`
	WindowMax float64 `json:"window_max_s"`
}

// ttftRows is nil for a run whose pulls were not streamed.
func ttftRows(r Run) []TTFTRow {
	all := map[int][]time.Duration{}
	win := map[int][]time.Duration{}
	for _, s := range r.Samples {
		if s.TTFT <= 0 {
			continue
		}
		all[s.Source] = append(all[s.Source], s.TTFT)
		if r.HasWindow && s.Start >= r.Window.Start && s.Start < r.Window.End {
			win[s.Source] = append(win[s.Source], s.TTFT)
		}
	}
	if len(all) == 0 {
		return nil
	}
	var rows []TTFTRow
	for src, d := range all {
		row := TTFTRow{Source: src, N: len(d), P50: check.Median(d).Seconds(), Max: slices.Max(d).Seconds()}
		if w := win[src]; len(w) > 0 {
			row.WindowN, row.WindowP50, row.WindowMax = len(w), check.Median(w).Seconds(), slices.Max(w).Seconds()
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b TTFTRow) int { return a.Source - b.Source })
	return rows
}

// writeTTFT appends report.md's TTFT table for the streamed rows.
func writeTTFT(b *strings.Builder, rows []Row) {
	for _, r := range rows {
		if len(r.TTFT) == 0 {
			continue
		}
		fmt.Fprintf(b, "\nTime to first token (streamed pulls), %s:\n\n", r.title())
		b.WriteString(markdownTable(ttftHeader(), ttftCells(r)))
	}
}

func ttftHeader() []string {
	return []string{"source", "n", "p50", "max", "in fault window: n", "p50", "max"}
}

// ttftCells is the row's TTFT table, a line per source.
func ttftCells(r Row) [][]string {
	out := make([][]string, 0, len(r.TTFT))
	for _, t := range r.TTFT {
		win := []string{notApplicable, notApplicable, notApplicable}
		if t.WindowN > 0 {
			win = []string{fmt.Sprint(t.WindowN), fmt.Sprintf("%.2f s", t.WindowP50), fmt.Sprintf("%.2f s", t.WindowMax)}
		}
		out = append(out, append([]string{fmt.Sprint(t.Source), fmt.Sprint(t.N), fmt.Sprintf("%.2f s", t.P50), fmt.Sprintf("%.2f s", t.Max)}, win...))
	}
	return out
}
