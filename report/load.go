package report

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/scrape"
)

// LoadRow is a fault kind's own load on a source (busy) as it ended:
// what it sent and what came of it, so a reader sees it really ran.
// report.json gives them as rows[].loads.
type LoadRow struct {
	Kind         string  `json:"kind"`
	Source       int     `json:"source"`
	Concurrency  int     `json:"concurrency"`
	PromptTokens int     `json:"prompt_tokens"`
	Start        float64 `json:"start_s"` // since t0
	End          float64 `json:"end_s"`   // 0: it had not ended when the events stop
	Sent         int     `json:"sent"`
	Answered     int     `json:"answered"`
	Failed       int     `json:"failed"`
	Cancelled    int     `json:"cancelled"` // in flight at the end, cut off
	P50          float64 `json:"p50_s"`     // of the answered
	Max          float64 `json:"max_s"`
	LastErr      string  `json:"last_error,omitempty"`
}

// addLoad keeps a load event: the latest report of each load (by source
// and start), its final one once it came.
func addLoad(loads []event.LoadInfo, l event.LoadInfo) []event.LoadInfo {
	for i, o := range loads {
		if o.Source == l.Source && o.Start == l.Start {
			if !o.Final {
				loads[i] = l
			}
			return loads
		}
	}
	return append(loads, l)
}

func loadRows(r Run) []LoadRow {
	var out []LoadRow
	for _, l := range r.Loads {
		out = append(out, LoadRow{Kind: l.Kind, Source: l.Source, Concurrency: l.Concurrency, PromptTokens: l.PromptTokens,
			Start: l.Start.Seconds(), End: l.End.Seconds(), Sent: l.Sent, Answered: l.Answered, Failed: l.Failed,
			Cancelled: l.Cancelled, P50: l.P50.Seconds(), Max: l.Max.Seconds(), LastErr: l.LastErr})
	}
	return out
}

// LookupRow is the decoder's async lookup delay over one span of the run
// (the baseline before the first fault, each fault window, the recovery
// after it), from its histogram; for a fault window, how much of the
// faulted pulls' latency that delay was. report.json: rows[].lookup_delay.
type LookupRow struct {
	Window string      `json:"window"` // "baseline", "1: busy source-0", "1: after"
	Start  float64     `json:"start_s"`
	End    float64     `json:"end_s"`
	Delay  event.Delay `json:"delay"`
	// For a fault window: its faulted pulls (started in it, naming its
	// source) and their mean latency, and the share of that latency the
	// lookup delay was, estimated (LookupShare); absent elsewhere or when
	// it cannot be told.
	FaultedN    int      `json:"faulted_n,omitempty"`
	FaultedMean float64  `json:"faulted_mean_s,omitempty"`
	Share       *float64 `json:"lookup_share,omitempty"`
}

// lookupRows are the decoder's lookup delay per span; none when the
// decoder does not export the histogram (vLLM per request reports none:
// its answers carry no lookup time, so the histogram is all there is).
func lookupRows(r Run) []LookupRow {
	pts := r.Metrics[firstDecoder(r.Info)]
	if len(pts) == 0 || !scrape.Window(pts, 0, r.RunEnd+time.Second).LookupAsync.Exported {
		return nil
	}
	end := r.RunEnd
	first := end
	if len(r.Windows) > 0 {
		first = r.Windows[0].Start
	}
	span := func(name string, from, to time.Duration) LookupRow {
		return LookupRow{Window: name, Start: from.Seconds(), End: to.Seconds(), Delay: scrape.Window(pts, from, to).LookupAsync}
	}
	base := span("baseline", 0, first)
	out := []LookupRow{base}
	for i, w := range r.Windows {
		row := span(fmt.Sprintf("%d: %s %s", i+1, w.Kind, w.TargetName()), w.Start, w.End)
		lookupShare(&row, r.Samples, w, base.Delay)
		out = append(out, row)
		if !w.Recovers {
			continue
		}
		to := min(w.End+r.Info.Bounds.RecoveryWindow, end)
		if i+1 < len(r.Windows) {
			to = min(to, r.Windows[i+1].Start)
		}
		if to > w.End {
			out = append(out, span(fmt.Sprintf("%d: after", i+1), w.End, to))
		}
	}
	return out
}

// lookupShare estimates how much of the faulted pulls' latency in window
// w was the decoder's lookup delay: the delay the decoder observed over
// the window, less the healthy pulls' share of it (each charged the
// baseline's mean, the delay a pull of an idle source waits), over the
// faulted pulls' summed latency. The histogram is the decoder's, over
// every pull, so the split between sources is this estimate, not a
// measurement.
func lookupShare(row *LookupRow, samples []event.Sample, w event.Window, base event.Delay) {
	var faulted, healthy int
	var sum time.Duration
	for _, s := range samples {
		if s.Start < w.Start || s.Start >= w.End {
			continue
		}
		if s.Source == w.Source {
			faulted++
			sum += s.Latency
		} else {
			healthy++
		}
	}
	row.FaultedN = faulted
	if faulted == 0 {
		return
	}
	row.FaultedMean = sum.Seconds() / float64(faulted)
	d := row.Delay
	if !d.Mean.OK || sum <= 0 {
		return
	}
	own := d.Mean.V * float64(d.N)
	if base.Mean.OK {
		own -= base.Mean.V * float64(healthy)
	}
	share := min(max(own/sum.Seconds(), 0), 1)
	row.Share = &share
}

// LoadTable is what a terminal shows of the rows' loads; "" when none.
func LoadTable(rows []Row) string { return loadTable(rows).plain() }

// LookupTable is what a terminal shows of the decoder's lookup delay per
// span; "" when no row has it.
func LookupTable(rows []Row) string { return lookupTable(rows).plain() }

func loadTable(rows []Row) table {
	return table{loadHeader(manyModes(rows)), loadCells(rows),
		"The fault's own load on the source (p2pfault's load generator, apart from the probe's trials; cancelled: in flight at the window's end, cut off):"}
}

func lookupTable(rows []Row) table {
	return table{lookupHeader(manyModes(rows)), lookupCells(rows), lookupCaption + ":"}
}

func loadHeader(withMode keyCols) []string {
	return append(keyHead(withMode), "load", "on", "from", "to", "sent", "answered", "failed", "cancelled at end", "p50 / max")
}

func loadCells(rows []Row) [][]string {
	var cells [][]string
	withMode := manyModes(rows)
	for _, r := range rows {
		for _, l := range r.Loads {
			to := "running"
			if l.End > 0 {
				to = fmt.Sprintf("%.1f s", l.End)
			}
			cells = append(cells, append(r.keyCells(withMode),
				fmt.Sprintf("%s %dx%d", l.Kind, l.Concurrency, l.PromptTokens), event.SourceName(l.Source),
				fmt.Sprintf("%.1f s", l.Start), to, fmt.Sprint(l.Sent), fmt.Sprint(l.Answered), fmt.Sprint(l.Failed),
				fmt.Sprint(l.Cancelled), fmt.Sprintf("%s / %s", latencyCell(l.P50), latencyCell(l.Max))))
		}
	}
	return cells
}

func lookupHeader(withMode keyCols) []string {
	return append(keyHead(withMode), "span", "lookups", "delay p50", "max (bucket)", "mean", "faulted pulls, mean", "lookup share")
}

func lookupCells(rows []Row) [][]string {
	var cells [][]string
	withMode := manyModes(rows)
	for _, r := range rows {
		for _, l := range r.Lookup {
			d := l.Delay
			p50, mean, top := notApplicable, notApplicable, notApplicable
			if d.P50.OK {
				p50, mean = latencyCell(d.P50.V), latencyCell(d.Mean.V)
				top = "≤ " + latencyCell(d.Max.V)
				if d.Over {
					top = "> " + latencyCell(d.Max.V)
				}
			}
			faulted, share := notApplicable, notApplicable
			if l.FaultedN > 0 {
				faulted = fmt.Sprintf("%d, %s", l.FaultedN, latencyCell(l.FaultedMean))
			}
			if l.Share != nil {
				share = fmt.Sprintf("%.0f%%", 100**l.Share)
			}
			cells = append(cells, append(r.keyCells(withMode), l.Window, fmt.Sprint(d.N), p50, top, mean, faulted, share))
		}
	}
	return cells
}

// writeLoads appends report.md's tables of the loads and of the decoder's
// lookup delay.
func writeLoads(b *strings.Builder, rows []Row) {
	loadTable(rows).writeMarkdown(b)
	lookupTable(rows).writeMarkdown(b)
}

const lookupCaption = "The decoder's async lookup delay (vllm:kv_offload_lookup_async_delay_seconds) per span: p50 and max as its buckets place them, the mean from its sum. " +
	"The engine reports no lookup time per pull, so a faulted pull's lookup share is estimated over its window: the delay the decoder observed, " +
	"less the healthy pulls' at the baseline's mean, over the faulted pulls' summed latency"
