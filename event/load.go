package event

import "time"

// KindLoad is a fault kind's own load on a source (busy: p2pfault's load
// generator, package load), apart from the probe's trials: sent once a
// second while it runs, and once more (Final) when it stopped at its
// window's end, so a reader sees the load really ran.
const KindLoad Kind = "load"

// LoadInfo is one report of a load on a source.
type LoadInfo struct {
	Kind   string `json:"kind"` // the fault kind that sends it (busy)
	Source int    `json:"source"`
	// What it sends: this many requests in flight at once, each a prompt
	// of PromptTokens tokens and MaxTokens completion tokens.
	Concurrency  int `json:"concurrency"`
	PromptTokens int `json:"prompt_tokens"`
	MaxTokens    int `json:"max_tokens"`
	// Start is when it began, since t0; End when it stopped (0 while it
	// runs). Final: it stopped and every request of it has ended.
	Start time.Duration `json:"start_ns"`
	End   time.Duration `json:"end_ns,omitempty"`
	Final bool          `json:"final,omitempty"`
	LoadCounts
}

// LoadCounts are a load's requests so far.
type LoadCounts struct {
	Sent      int `json:"sent"`
	Answered  int `json:"answered"`  // answered 200
	Failed    int `json:"failed"`    // answered otherwise or failed, before the end
	Cancelled int `json:"cancelled"` // in flight at the end, cut off
	InFlight  int `json:"in_flight"`
	// P50 and Max are the answered requests' latency.
	P50     time.Duration `json:"p50_ns"`
	Max     time.Duration `json:"max_ns"`
	LastErr string        `json:"last_error,omitempty"`
}
