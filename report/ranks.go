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
	Source int `json:"source"`
	Rank   int `json:"rank"`
	// Decoder names the decoder the pulls went through, in a run of
	// several (--decoders): then every source has rows, one per rank and
	// decoder; absent in a run of one.
	Decoder string `json:"decoder,omitempty"`
	Part    string `json:"part"` // fault, recovery or outside (check.Part*)
	ranked  bool   // its source has several ranks: the row names the rank
	N       int    `json:"n"`
	Pulled  int    `json:"pulled"`
	// HitRate is Pulled / N; null without a pull.
	HitRate  *float64 `json:"hit_rate"`
	InFlight int      `json:"in_flight"`
	P50      float64  `json:"p50_s"`
	P90      float64  `json:"p90_s"`
	Max      float64  `json:"max_s"`
}

func rankRows(v event.Verdict, info event.RunInfo) []RankRow {
	out := make([]RankRow, 0, len(v.Ranks))
	for _, s := range v.Ranks {
		r := RankRow{Source: s.Source, Rank: s.Rank, Part: s.Part, N: s.N, Pulled: s.Pulled, InFlight: s.InFlight,
			P50: s.Latency.P50.Seconds(), P90: s.Latency.P90.Seconds(), Max: s.Latency.Max.Seconds()}
		if info.Decoders > 1 {
			r.Decoder = event.DecoderName(s.Decoder, info.Decoders)
		}
		r.ranked = event.RanksOf(info.SourceRanks, s.Source) > 1
		if s.N > 0 {
			rate := float64(s.Pulled) / float64(s.N)
			r.HitRate = &rate
		}
		out = append(out, r)
	}
	return out
}

// name is what the row's pulls went through: "source-0/rank1", and
// " via decoder-1" in a run of several decoders.
func (k RankRow) name() string {
	n := event.SourceName(k.Source)
	if k.ranked {
		n = event.RankName(k.Source, k.Rank)
	}
	if k.Decoder != "" {
		n += " via " + k.Decoder
	}
	return n
}

// partWords name a part in the table.
var partWords = map[string]string{
	check.PartFault:    "in its fault window",
	check.PartRecovery: "in its recovery",
	check.PartOutside:  "outside its windows",
}

// byDecoder says whether any row breaks its pulls down by decoder.
func byDecoder(rows []Row) bool {
	for _, r := range rows {
		if len(r.Ranks) > 0 && r.Ranks[0].Decoder != "" {
			return true
		}
	}
	return false
}

func rankHeader(rows []Row) []string {
	what := "rank"
	if byDecoder(rows) {
		what = "pair"
	}
	return append(keyHead(manyModes(rows)), what, "pulls", "hit rate", "p50", "p90", "max", "in flight")
}

// rankCells is a line per row, source, part and rank.
func rankCells(rows []Row) [][]string {
	withMode := manyModes(rows)
	var out [][]string
	for _, r := range rows {
		for _, k := range r.Ranks {
			c := append(r.keyCells(withMode), k.name()+" "+partWords[k.Part], fmt.Sprint(k.N))
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

func rankTable(rows []Row) table {
	caption := rankCaption
	if byDecoder(rows) {
		caption = pairCaption + caption
	}
	return table{rankHeader(rows), rankCells(rows), caption + "."}
}

// pairCaption leads the caption in a run of several decoders.
const pairCaption = "Per decoder↔source pair (--decoders): each source's pulls through each decoder (its rank too, when it has several). "

const rankCaption = "Per data-parallel rank: each rank's pulls (pinned to it with X-data-parallel-rank, naming its port base+rank), " +
	"by what they were to their source's fault windows: started in one, in its recovery window, or outside both; " +
	"latency from send to the whole answer"

// writeRanks appends report.md's per-rank table.
func writeRanks(b *strings.Builder, rows []Row) { rankTable(rows).writeMarkdown(b) }
