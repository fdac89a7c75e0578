package event

import (
	"fmt"
	"time"
)

// The checks' value types (package check computes them): the bounds a run
// is judged by, its fault windows, each check's result and the verdict,
// and what the host showed of each fault action. They are facts of the
// stream, so every face and `p2pfault report` read them from the events.

// Bounds are the limits of the slice. Defaults are the seed's; every one is
// a flag, and all durations are multiplied by --time-scale.
type Bounds struct {
	FaultedMax      time.Duration // check 2: pulls naming the faulted source end within this
	DetectAfter     time.Duration // check 3: from fault start + DetectAfter on ...
	FaultedMedian   time.Duration // ... they take at most this at the median
	HealthyHitRate  float64       // check 4: fraction of healthy pulls that hit, at least
	HealthyMax      time.Duration // check 4: each healthy pull ends within this
	RecoveryWindow  time.Duration // check 5: window after the fault window ends
	RecoveryHitRate float64       // check 5: fraction of faulted-source pulls that hit again, at least
}

// Scaled multiplies every duration by f (the run's --time-scale).
func (b Bounds) Scaled(f float64) Bounds {
	s := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	b.FaultedMax = s(b.FaultedMax)
	b.DetectAfter = s(b.DetectAfter)
	b.FaultedMedian = s(b.FaultedMedian)
	b.HealthyMax = s(b.HealthyMax)
	b.RecoveryWindow = s(b.RecoveryWindow)
	return b
}

// Window is the fault window on the faulted source, relative to t0.
// Stall: fault to SIGCONT. Kill: fault to the restarted source ready.
// Remove: fault to the end of the run (Recovers false).
type Window struct {
	Source   int           `json:"source"`
	Start    time.Duration `json:"start_ns"`
	End      time.Duration `json:"end_ns"`
	Recovers bool          `json:"recovers"` // whether check 5 applies (stall, kill)
	// Kind is the fault kind that opened it (stall, kill, ...; "" in
	// streams written before windows carried it).
	Kind string `json:"kind,omitempty"`
	// Target is what the fault that opened it acted on when it was less
	// than the whole source: one data-parallel rank, "source-0/rank1".
	Target string `json:"target,omitempty"`
}

// TargetName is what w's fault acted on: its Target, or its source.
func (w Window) TargetName() string { return targetName(w.Source, w.Target) }

func targetName(source int, target string) string {
	if target != "" {
		return target
	}
	return SourceName(source)
}

// Result is one check's verdict. Detail is a message like the seed's
// ("a request naming the faulted source took 30.0s (bound 15.0s)") and
// says so when the window was empty.
type Result struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
	Empty  bool   `json:"empty,omitempty"` // the check's window held no pull
	// Pending is how many pulls still in flight (sent, no answer yet, or
	// cut short by the run's end) the check counted, by their age so far:
	// a check fails at once when they have already broken its bound.
	Pending int `json:"pending,omitempty"`
}

// Stats summarise a set of pulls, in real (wall) seconds.
type Stats struct {
	N      int           `json:"n"`
	Pulled int           `json:"pulled"` // pulls that hit (cached_tokens > 0)
	P50    time.Duration `json:"p50_ns"`
	Max    time.Duration `json:"max_ns"`
}

// SeedLine is the seed's summary line for one set of pulls, e.g.
// "fault faulted: n=54 pulled=0 p50=16.85s max=30.04s".
func (s Stats) SeedLine(label string) string {
	return fmt.Sprintf("fault %s: n=%d pulled=%d p50=%.2fs max=%.2fs",
		label, s.N, s.Pulled, s.P50.Seconds(), s.Max.Seconds())
}

// Summary is the figures of one row of the seed's table.
type Summary struct {
	Faulted  Stats `json:"faulted"`  // pulls naming the faulted source, started in the fault window
	Healthy  Stats `json:"healthy"`  // pulls naming any other source, started in the fault window
	Recovery Stats `json:"recovery"` // pulls naming the faulted source, started in the recovery window
	// AfterDetect is the faulted pulls started DetectAfter after the fault
	// on, those check 3 takes the median of (its P50); absent in a verdict
	// of several windows and in streams from before it.
	AfterDetect Stats `json:"after_detect,omitzero"`
}

// Verdict is the outcome of all checks over one run.
type Verdict struct {
	Passed  bool     `json:"passed"`
	Checks  []Result `json:"checks"`
	Summary Summary  `json:"summary"`
	// Times are the judged fault's detect and recover times (FaultTimes),
	// absent from a verdict without a fault window.
	Times *Times `json:"times,omitempty"`
	// Steady is each source's pulls outside every fault window (a soak's
	// whole run): check.Judge's. Only the final verdict carries it.
	Steady []SourceSummary `json:"steady,omitempty"`
	// Ranks breaks the pulls naming a source of several data-parallel
	// ranks down by rank and by what they were to its fault windows
	// (final verdicts; none for sources of one rank).
	Ranks []RankSummary `json:"ranks,omitempty"`
	// Windows are every fault window judged on its own and Kinds what
	// they came to per kind (windows.go), for a run of more than one
	// window; a live verdict carries the windows not yet settled.
	Windows []WindowVerdict `json:"windows,omitempty"`
	Kinds   []KindSummary   `json:"kinds,omitempty"`
	// NotJudged names every fault window that could not be judged and why
	// ("window 1 (stall source-0 at 10.0s): ..."; check/baseline.go). A
	// verdict with one did not pass; its Checks leave that window out.
	NotJudged []string `json:"not_judged,omitempty"`
}

// Failed reports whether a bound failed: a check did not hold, or the
// verdict did not pass with every window judged. A verdict that did not
// pass and did not fail could not be judged (exit 3).
func (v Verdict) Failed() bool {
	for _, c := range v.Checks {
		if !c.Passed {
			return true
		}
	}
	return !v.Passed && len(v.NotJudged) == 0
}

// Verification is what became of one fault action: whether its effect was
// seen on the host (every member of a stalled session in state T, ...) and
// how long after the action.
type Verification struct {
	Action string `json:"action"` // stall, resume, kill, remove, ...
	Source int    `json:"source"`
	// Target is what the action acted on when it was less than the whole
	// source: one data-parallel rank, "source-0/rank1"; "" for the source.
	Target   string        `json:"target,omitempty"`
	At       time.Duration `json:"at_ns"`    // the action, since t0
	Verified bool          `json:"verified"` // the effect was seen
	After    time.Duration `json:"after_ns"` // from the action until seen, or until verification gave up
	Detail   string        `json:"detail"`   // what was seen, e.g. "2 of 2 processes of session 4242 in state T"
}

// TargetName is what v's action acted on: its Target, or its source.
func (v Verification) TargetName() string { return targetName(v.Source, v.Target) }

// Times are how long one fault took to be noticed and to be over, in real
// seconds; nil where it never happened. report.json gives them as
// rows[].times.
type Times struct {
	DetectS  *float64 `json:"detect_s"`
	RecoverS *float64 `json:"recover_s"`
}
