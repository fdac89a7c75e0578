package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/scrape"
)

// ParkedRow is one source's parked stores over the run, as its /metrics
// read them (the sim's sim:p2p_parked_stores and sim:p2p_pinned_blocks;
// vLLM exports neither): what check.NameParkedStores judges.
type ParkedRow struct {
	Source int           `json:"source"`
	Points []ParkedPoint `json:"points"`
}

// ParkedPoint is one scrape: T since t0.
type ParkedPoint struct {
	T      float64 `json:"t_s"`
	Stores float64 `json:"stores"`
	Blocks float64 `json:"blocks"`
}

// parkedRows is each source's series, when the sources export it and the
// run had stores parked or a check of them; nil otherwise (a plain run's
// zeros would only fill the report).
func parkedRows(r Run, checks []CheckRow) []ParkedRow {
	var rows []ParkedRow
	some := false
	for s := range r.Info.Sources {
		row := ParkedRow{Source: s}
		for _, p := range r.Metrics[event.SourceName(s)] {
			if !p.Reading.ParkedStores.OK || p.T < 0 {
				continue
			}
			row.Points = append(row.Points, ParkedPoint{T: p.T.Seconds(), Stores: p.Reading.ParkedStores.V, Blocks: p.Reading.PinnedBlocks.V})
			some = some || p.Reading.ParkedStores.V > 0
		}
		if len(row.Points) > 0 {
			rows = append(rows, row)
		}
	}
	for _, c := range checks {
		some = some || c.Name == check.NameParkedStores
	}
	if !some {
		return nil
	}
	return rows
}

// parkedSteps is how many instants report.md shows of a series.
const parkedSteps = 16

// writeParked appends report.md's table of each source's parked stores:
// at most parkedSteps instants, evenly over the run, each the highest
// reading since the one before (report.json has every reading).
func writeParked(b *strings.Builder, rows []Row) {
	for _, r := range rows {
		if len(r.Parked) == 0 {
			continue
		}
		end := time.Duration(0)
		for _, s := range r.Parked {
			end = max(end, time.Duration(s.Points[len(s.Points)-1].T*float64(time.Second)))
		}
		step := time.Duration(math.Ceil(end.Seconds()/parkedSteps)) * time.Second
		step = max(step, time.Second)
		head := []string{"until"}
		for _, s := range r.Parked {
			head = append(head, event.SourceName(s.Source))
		}
		var cells [][]string
		for at := step; at < end+step; at += step {
			line := []string{fmt.Sprintf("%.0fs", at.Seconds())}
			for _, s := range r.Parked {
				line = append(line, peakUntil(s.Points, at-step, at))
			}
			cells = append(cells, line)
		}
		caption := fmt.Sprintf("%s: each source's parked stores (blocks they pin) over the run, the highest reading in each %s (%s, %s)",
			r.title(), step, scrape.SeriesParkedStores, scrape.SeriesPinnedBlocks)
		table{head, cells, caption + ":"}.writeMarkdown(b)
	}
}

// peakUntil is the highest of pts in [from, to) as "stores (blocks)", "–"
// when none was read there.
func peakUntil(pts []ParkedPoint, from, to time.Duration) string {
	var peak *ParkedPoint
	for i, p := range pts {
		t := time.Duration(p.T * float64(time.Second))
		if t < from || t >= to {
			continue
		}
		if peak == nil || p.Stores > peak.Stores {
			peak = &pts[i]
		}
	}
	if peak == nil {
		return notApplicable
	}
	return fmt.Sprintf("%g (%g)", peak.Stores, peak.Blocks)
}
