package event

import "math"

// DefaultTimeScale is the time scale of a run that sets none: real time.
const DefaultTimeScale = 1.0

// TimeScaleOf is a run's time scale, 0 (not set: a Config's zero value, a
// stream written without one) read as DefaultTimeScale: the one default
// of the value, for the runner, the experiment, the reports and the
// dashboard alike.
func TimeScaleOf(scale float64) float64 {
	if scale == 0 {
		return DefaultTimeScale
	}
	return scale
}

// ValidTimeScale says whether scale can multiply a run's durations: a
// positive, finite number. The one test of p2pfault's --time-scale and
// the simulated engine's --sim-time-scale; each flag words its refusal.
func ValidTimeScale(scale float64) bool {
	return scale > 0 && !math.IsInf(scale, 0)
}
