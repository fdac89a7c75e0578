package ui

import (
	"math"
	"time"
)

// nearestRank is the q-quantile of sorted values.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
