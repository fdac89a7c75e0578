package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// TestRankTableBreaksASourceDownByRank: a verdict's per-rank breakdown
// becomes report.json's rows[].ranks and a table line per rank and part,
// rank 0's fast fallback beside rank 1's stall; a row without one prints
// no table.
func TestRankTableBreaksASourceDownByRank(t *testing.T) {
	sum := func(rank int, part string, n, pulled int, p50, max time.Duration) event.RankSummary {
		return event.RankSummary{Rank: rank, Part: part, SourceSummary: event.SourceSummary{Source: 0, N: n, Pulled: pulled,
			Latency: event.Percentiles{N: n, P50: p50, P90: max, Max: max}}}
	}
	v := event.Verdict{Ranks: []event.RankSummary{
		sum(0, check.PartFault, 30, 0, 120*time.Millisecond, 130*time.Millisecond),
		sum(1, check.PartFault, 29, 0, 36*time.Second, 40*time.Second),
		sum(1, check.PartOutside, 0, 0, 0, 0),
	}}
	row := Row{Arm: "main", Case: "stall", Mode: event.ModePD, Ranks: rankRows(v)}
	got := RankTable([]Row{row})
	for _, want := range []string{
		"rank", "source-0/rank0 in its fault window  30     0.0%      120.0 ms",
		"source-0/rank1 in its fault window  29     0.0%      36.00 s   40.00 s   40.00 s",
		"source-0/rank1 outside its windows  0      –",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"ranks":[{"source":0,"rank":0,"part":"fault","n":30,"pulled":0,"hit_rate":0,`) {
		t.Errorf("report.json row: %s", b)
	}
	if RankTable([]Row{{Arm: "main", Case: "stall"}}) != "" {
		t.Error("a row without ranks printed a rank table")
	}
}
