package report

import (
	"fmt"
	"slices"
)

// decoderRow is one decoder's pulls of a row, summed over its pairs (the
// per-pair table's lines through it): a run of several decoders only.
type decoderRow struct {
	Decoder          string
	N, Pulled        int
	InFlight         int
	P50Lo, P50Hi     float64 // the lowest and highest of its pairs' p50s
	Max              float64
	pairs, withPulls int
}

// decodersOf sums r's per-pair lines by decoder, in the decoders' order.
func decodersOf(r Row) []decoderRow {
	var out []decoderRow
	for _, k := range r.Ranks {
		if k.Decoder == "" {
			return nil
		}
		i := slices.IndexFunc(out, func(d decoderRow) bool { return d.Decoder == k.Decoder })
		if i < 0 {
			out = append(out, decoderRow{Decoder: k.Decoder})
			i = len(out) - 1
		}
		d := &out[i]
		d.N, d.Pulled, d.InFlight, d.pairs = d.N+k.N, d.Pulled+k.Pulled, d.InFlight+k.InFlight, d.pairs+1
		if k.N == 0 {
			continue
		}
		if d.withPulls == 0 || k.P50 < d.P50Lo {
			d.P50Lo = k.P50
		}
		d.P50Hi, d.Max, d.withPulls = max(d.P50Hi, k.P50), max(d.Max, k.Max), d.withPulls+1
	}
	return out
}

// perDecoderCaption says what the per-decoder table sums.
const perDecoderCaption = "Per decoder (--decoders): each decoder's pulls from every source, in every part of the per-pair table below " +
	"(hit rate over all of them; p50 as the lowest and highest of its pairs' medians, which do not add up to one; max the worst pair's)."

// decoderTable is a line per row and decoder.
func decoderTable(rows []Row) table {
	withMode := manyModes(rows)
	var cells [][]string
	for _, r := range rows {
		for _, d := range decodersOf(r) {
			c := append(r.keyCells(withMode), d.Decoder, fmt.Sprint(d.N))
			if d.N == 0 {
				c = append(c, notApplicable, notApplicable, notApplicable)
			} else {
				p50 := latencyCell(d.P50Lo)
				if d.P50Hi != d.P50Lo {
					p50 += "–" + latencyCell(d.P50Hi)
				}
				c = append(c, fmt.Sprintf("%.1f%%", 100*float64(d.Pulled)/float64(d.N)), p50, latencyCell(d.Max))
			}
			cells = append(cells, append(c, fmt.Sprint(d.InFlight)))
		}
	}
	head := append(keyHead(withMode), "decoder", "pulls", "hit rate", "p50 (pairs)", "max", "in flight")
	return table{head, cells, perDecoderCaption}
}
