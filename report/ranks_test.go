package report

import (
	"bytes"
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
	row := Row{Arm: "main", Case: "stall", Mode: event.ModePD, Ranks: rankRows(v, event.RunInfo{SourceRanks: []int{2}})}
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

// TestRankTableBreaksPullsDownByDecoder: in a run of several decoders
// every source has rows, one per decoder it was pulled through, named by
// the pair; report.json names the decoder.
func TestRankTableBreaksPullsDownByDecoder(t *testing.T) {
	sum := func(src, dec int, part string, n, pulled int) event.RankSummary {
		return event.RankSummary{Decoder: dec, Part: part, SourceSummary: event.SourceSummary{Source: src, N: n, Pulled: pulled,
			Latency: event.Percentiles{N: n, P50: 40 * time.Millisecond, P90: 50 * time.Millisecond, Max: 60 * time.Millisecond}}}
	}
	v := event.Verdict{Ranks: []event.RankSummary{
		sum(0, 0, check.PartOutside, 10, 10),
		sum(0, 1, check.PartOutside, 10, 4),
		sum(1, 1, check.PartOutside, 12, 12),
	}}
	row := Row{Arm: "main", Case: "none", Ranks: rankRows(v, event.RunInfo{Sources: 2, Decoders: 2})}
	got := RankTable([]Row{row})
	for _, want := range []string{
		"pair",
		"source-0 via decoder-0 outside its windows  10     100.0%",
		"source-0 via decoder-1 outside its windows  10     40.0%",
		"source-1 via decoder-1 outside its windows  12     100.0%",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `{"source":0,"rank":0,"decoder":"decoder-1","part":"outside","n":10,"pulled":4,`) {
		t.Errorf("report.json row: %s", b)
	}

	// The per-decoder table sums each decoder's pairs: decoder-1's 22
	// pulls, 16 of them hits.
	dt := decoderTable([]Row{row}).plain()
	for _, want := range []string{"decoder-0  10     100.0%", "decoder-1  22     72.7%"} {
		if !strings.Contains(dt, want) {
			t.Errorf("per-decoder table lacks %q:\n%s", want, dt)
		}
	}
	// report.html has both, titled by decoder.
	var page bytes.Buffer
	run := Run{Info: event.RunInfo{Arm: "main", Case: "none", Sources: 2, Decoders: 2}, Verdict: v}
	if err := WriteHTML(&page, []Run{run}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="table-decoders"`, "Per decoder↔source pair", "72.7%"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
}
