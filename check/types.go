package check

import (
	"time"

	"p2pfault/probe"
)

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

// DefaultBounds returns the seed's bounds at real time.
func DefaultBounds() Bounds {
	return Bounds{
		FaultedMax:      15 * time.Second,
		DetectAfter:     2 * time.Second,
		FaultedMedian:   2 * time.Second,
		HealthyHitRate:  0.90,
		HealthyMax:      5 * time.Second,
		RecoveryWindow:  25 * time.Second,
		RecoveryHitRate: 0.50,
	}
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
}

// Input is everything the checks look at: pure data, no I/O.
type Input struct {
	Samples []probe.Sample
	Window  Window
	RunEnd  time.Duration // when the probe stopped sending, since t0
	Bounds  Bounds
}

// Check names, stable: JSON and JUnit use them.
const (
	NameAll200        = "all_200"
	NameFaultedBound  = "faulted_max"
	NameFaultedMedian = "faulted_median_after_detect"
	NameHealthy       = "healthy_keeps_hitting"
	NameRecovery      = "recovery_hits_again"
)

// Result is one check's verdict. Detail is a message like the seed's
// ("a request naming the faulted source took 30.0s (bound 15.0s)") and
// says so when the window was empty.
type Result struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
	Empty  bool   `json:"empty,omitempty"` // the check's window held no pull
}

// Stats summarise a set of pulls, in real (wall) seconds.
type Stats struct {
	N      int           `json:"n"`
	Pulled int           `json:"pulled"` // pulls that hit (cached_tokens > 0)
	P50    time.Duration `json:"p50_ns"`
	Max    time.Duration `json:"max_ns"`
}

// Summary is the figures of one row of the seed's table.
type Summary struct {
	Faulted  Stats `json:"faulted"`  // pulls naming the faulted source, started in the fault window
	Healthy  Stats `json:"healthy"`  // pulls naming any other source, started in the fault window
	Recovery Stats `json:"recovery"` // pulls naming the faulted source, started in the recovery window
}

// Verdict is the outcome of all checks over one run.
type Verdict struct {
	Passed  bool     `json:"passed"`
	Checks  []Result `json:"checks"`
	Summary Summary  `json:"summary"`
	// Times are the judged fault's detect and recover times (FaultTimes),
	// absent from a verdict without a fault window.
	Times *Times `json:"times,omitempty"`
}
