package check

import (
	"p2pfault/event"
	"time"
)

// DefaultBounds returns the seed's bounds at real time.
func DefaultBounds() event.Bounds {
	return event.Bounds{
		FaultedMax:      15 * time.Second,
		DetectAfter:     2 * time.Second,
		FaultedMedian:   2 * time.Second,
		HealthyHitRate:  0.90,
		HealthyMax:      5 * time.Second,
		RecoveryWindow:  25 * time.Second,
		RecoveryHitRate: 0.50,
	}
}

// Input is everything the checks look at: pure data, no I/O.
type Input struct {
	// Samples are the pulls that ended, and those cut short by the run's
	// end (event.Sample.Aborted: in flight, aged by their Latency).
	Samples []event.Sample
	// Pending are the pulls sent and not ended at Now (pull_start events
	// without their sample); none may share a trial with a sample.
	Pending []event.PullStart
	// Now is when Pending's ages are read, since t0: the live verdict's
	// moment, or a stream's last timestamp; RunEnd when 0.
	Now    time.Duration
	Window event.Window
	RunEnd time.Duration // when the probe stopped sending, since t0
	Bounds event.Bounds
	// Content is the content check's rule; off (the zero value) leaves
	// content_matches out.
	Content ContentRule
}

// Check names, stable: JSON and JUnit use them.
const (
	NameAll200        = "all_200"
	NameFaultedBound  = "faulted_max"
	NameFaultedMedian = "faulted_median_after_detect"
	NameHealthy       = "healthy_keeps_hitting"
	NameRecovery      = "recovery_hits_again"
)
