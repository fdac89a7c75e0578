package event

import (
	"errors"
	"fmt"
	"math"
	"time"
)

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

// DefaultDuration is the one rule of a config's optional duration (the
// probe's and the scraper's): 0, not set, becomes def; a negative one is
// told to bad as "NAME D is negative", the caller's config error.
func DefaultDuration(d *time.Duration, def time.Duration, name string, bad func(format string, args ...any)) {
	switch {
	case *d < 0:
		bad("%s %s is negative", name, *d)
	case *d == 0:
		*d = def
	}
}

// ValidTimeScale says whether scale can multiply a run's durations: a
// positive, finite number. The one test of p2pfault's --time-scale and
// the simulated engine's --sim-time-scale; each flag words its refusal.
func ValidTimeScale(scale float64) bool {
	return scale > 0 && !math.IsInf(scale, 0)
}

// twoTo63 is one past the longest time.Duration, as a float64 (which
// holds it exactly): a product at or past it does not fit.
var twoTo63 = math.Ldexp(1, 63)

// CheckScaled says whether d, multiplied by scale (a valid time scale),
// is still a duration: nil, or why not, worded to follow "D × SCALE"
// ("overflows: ..." or "rounds to zero: ..."). A product past the longest
// time.Duration wraps to a negative one (a run recorded as lasting
// -292 years, a stall that fails as it fires); a positive one under a
// nanosecond becomes 0, which means "not set" (an untimed stall). Zero
// and negative d are the caller's to judge. It is the one rule of every
// duration p2pfault scales: its flags (package cli) and a timeline's steps
// (package experiment).
func CheckScaled(d time.Duration, scale float64) error {
	if d <= 0 {
		return nil
	}
	p := float64(d) * scale
	switch {
	case p >= twoTo63:
		return fmt.Errorf("overflows: at this scale a duration may be at most %v", LongestScaled(scale))
	case p < 1:
		least := 1 / scale
		if least >= twoTo63 {
			return errors.New("rounds to zero, as every duration does at this scale")
		}
		return fmt.Errorf("rounds to zero: at this scale a duration must be at least %v", time.Duration(math.Ceil(least)))
	}
	return nil
}

// LongestScaled is the longest duration that scale multiplies into a
// time.Duration, to the second when it is a second or more.
func LongestScaled(scale float64) time.Duration {
	m := math.Min(math.Floor(twoTo63/scale), math.Nextafter(twoTo63, 0))
	for m > 0 && m*scale >= twoTo63 {
		m = math.Nextafter(m, 0) // the quotient may round up to one that overflows
	}
	d := time.Duration(m)
	if d >= time.Second {
		d = d.Truncate(time.Second)
	}
	return d
}
