package report

import (
	"fmt"
	"strings"

	"p2pfault/event"
	"p2pfault/scrape"
)

// DecoderEngine is the engine whose /metrics the report's deltas read:
// the decoder is the one that pulls, so its counters show the fault.
const DecoderEngine = "decoder"

// firstDecoder is the decoder whose /metrics the report reads in a run of
// info: DecoderEngine, or decoder-0 of several (--decoders).
func firstDecoder(info event.RunInfo) string { return event.DecoderName(0, info.Decoders) }

// DecoderMetrics are the decoder's deltas over the judged fault window and
// the recovery window after it (absent for a fault that does not recover).
type DecoderMetrics struct {
	Fault    scrape.Deltas  `json:"fault_window"`
	Recovery *scrape.Deltas `json:"recovery_window,omitempty"`
}

func decoderMetrics(r Run) *DecoderMetrics {
	pts := r.Metrics[firstDecoder(r.Info)]
	if !r.HasWindow || len(pts) == 0 {
		return nil
	}
	w := r.Window
	d := &DecoderMetrics{Fault: scrape.Window(pts, w.Start, w.End)}
	if w.Recovers {
		end := w.End + r.Info.Bounds.RecoveryWindow
		if r.RunEnd > w.End && r.RunEnd < end {
			end = r.RunEnd
		}
		rec := scrape.Window(pts, w.End, end)
		d.Recovery = &rec
	}
	return d
}

// writeDecoder appends report.md's table of the decoder's /metrics deltas.
func writeDecoder(b *strings.Builder, rows []Row) {
	table{decoderHeader(manyModes(rows)), decoderCells(rows), decoderCaption + ":"}.writeMarkdown(b)
}

const decoderCaption = "The decoder's own /metrics over each window (– where it does not export the series)"

func decoderHeader(withMode keyCols) []string {
	return append(keyHead(withMode), "window", "external hit rate", "external hits / queries", "P2P read", "max running", "max waiting")
}

// decoderCells is the decoder table's lines: a row's fault window and, for
// a fault that recovers, its recovery window; none for rows not scraped.
func decoderCells(rows []Row) [][]string {
	var cells [][]string
	withMode := manyModes(rows)
	for _, r := range rows {
		if r.Decoder == nil {
			continue
		}
		cells = append(cells, deltaCells(r, withMode, "fault", r.Decoder.Fault))
		if r.Decoder.Recovery != nil {
			cells = append(cells, deltaCells(r, withMode, "recovery", *r.Decoder.Recovery))
		}
	}
	return cells
}

func deltaCells(r Row, withMode keyCols, window string, d scrape.Deltas) []string {
	rate := notApplicable
	if d.HitRate.OK {
		rate = fmt.Sprintf("%.0f%%", 100*d.HitRate.V)
	}
	read := notApplicable
	if d.P2PReadBytes.OK {
		read = event.FormatBytes(d.P2PReadBytes.V)
	}
	return append(r.keyCells(withMode), window, rate, d.ExtHits.String()+" / "+d.ExtQueries.String(), read, d.MaxRunning.String(), d.MaxWaiting.String())
}
