package check

import (
	"time"

	"p2pfault/event"
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

// Check names, stable: JSON and JUnit use them.
const (
	NameAll200        = "all_200"
	NameFaultedBound  = "faulted_max"
	NameFaultedMedian = "faulted_median_after_detect"
	NameHealthy       = "healthy_keeps_hitting"
	NameRecovery      = "recovery_hits_again"
)
