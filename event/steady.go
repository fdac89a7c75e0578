package event

import "time"

// SourceSummary is what a run says of the pulls naming one source outside
// every fault window: for a run without a fault (a soak), its whole run.
// Package check computes it (check.Judge's verdict); report.json gives it as
// rows[].steady.
type SourceSummary struct {
	Source int `json:"source"`
	N      int `json:"n"`      // pulls that ended (an answer, an error or a timeout)
	OK     int `json:"ok"`     // ... of which returned 200
	Errors int `json:"errors"` // ... of which did not return 200 or failed in transport
	Pulled int `json:"pulled"` // ... of which hit (cached tokens > 0)
	// InFlight is the pulls sent and never answered when the figures were
	// taken (still in flight, or cut short by the run's end): not in N.
	InFlight int         `json:"in_flight,omitempty"`
	Latency  Percentiles `json:"latency"`
	// TTFT is the time to first token of streamed pulls that got one; nil
	// when no pull was streamed.
	TTFT *Percentiles `json:"ttft,omitempty"`
}

// RankSummary is one data-parallel rank's pulls of one part of a run
// (Part: "fault", in a fault window on its source; "recovery", in its
// recovery window; "outside", neither): its source's figures for that
// rank alone. In a run of several decoders it is one rank's pulls through
// one decoder (Decoder; 0 and absent in a run of one).
type RankSummary struct {
	Rank    int    `json:"rank"`
	Decoder int    `json:"decoder,omitempty"`
	Part    string `json:"part"`
	SourceSummary
}

// Percentiles of a set of durations (from a bounded histogram: within
// 0.1 % of the exact value; Max is exact).
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}
