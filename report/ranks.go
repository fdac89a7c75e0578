package report

import (
	"fmt"
	"strings"

	"p2pfault/check"
	"p2pfault/event"
)

// RankRow is one data-parallel rank's pulls of one part of a row (the
// judge's breakdown, event.RankSummary): a source of several ranks only.
// report.json gives them as rows[].ranks.
type RankRow struct {
	Source int    `json:"source"`
	Rank   int    `json:"rank"`
	Part   string `json:"part"` // fault, recovery or outside (check.Part*)
	N      int    `json:"n"`
	Pulled int    `json:"pulled"`
	// HitRate is Pulled / N; null without a pull.
	HitRate  *float64 `json:"hit_rate"`
	InFlight int      `json:"in_flight"`
	P50      float64  `json:"p50_s"`
	P90      float64  `json:"p90_s"`
	Max      float64  `json:"max_s"`
}

func rankRows(v event.Verdict) []RankRow {
	out := make([]RankRow, 0, len(v.Ranks))
	for _, s := range v.Ranks {
		r := RankRow{Source: s.Source, Rank: s.Rank, Part: s.Part, N: s.N, Pulled: s.Pulled, InFlight: s.InFlight,
			P50: s.Latency.P50.Seconds(), P90: s.Latency.P90.Seconds(), Max: s.Latency.Max.Seconds()}
		if s.N > 0 {
			rate := float64(s.Pulled) / float64(s.N)
			r.HitRate = &rate
		}
		out = append(out, r)
	}
	return out
}

// partWords name a part in the table.
var partWords = map[string]string{
	check.PartFault:    "in its fault window",
	check.PartRecovery: "in its recovery",
	check.PartOutside:  "outside its windows",
}

func rankHeader(rows []Row) []string {
	return append(keyHead(manyModes(rows)), "rank", "pulls", "hit rate", "p50", "p90", "max", "in flight")
}

// rankCells is a line per row, source, part and rank.
func rankCells(rows []Row) [][]string {
	withMode := manyModes(rows)
	var out [][]string
	for _, r := range rows {
		for _, k := range r.Ranks {
			c := append(r.keyCells(withMode), event.RankName(k.Source, k.Rank)+" "+partWords[k.Part], fmt.Sprint(k.N))
			if k.N == 0 {
				c = append(c, notApplicable, notApplicable, notApplicable, notApplicable)
			} else {
				c = append(c, fmt.Sprintf("%.1f%%", 100**k.HitRate), latencyCell(k.P50), latencyCell(k.P90), latencyCell(k.Max))
			}
			out = append(out, append(c, fmt.Sprint(k.InFlight)))
		}
	}
	return out
}

// RankTable is the per-rank breakdown as aligned plain text; "" when no
// row has a source of several ranks.
func RankTable(rows []Row) string { return rankTable(rows).plain() }

func rankTable(rows []Row) table { return table{rankHeader(rows), rankCells(rows), rankCaption + "."} }

const rankCaption = "Per data-parallel rank: each rank's pulls (pinned to it with X-data-parallel-rank, naming its port base+rank), " +
	"by what they were to their source's fault windows: started in one, in its recovery window, or outside both; " +
	"latency from send to the whole answer"

// writeRanks appends report.md's per-rank table.
func writeRanks(b *strings.Builder, rows []Row) { rankTable(rows).writeMarkdown(b) }
