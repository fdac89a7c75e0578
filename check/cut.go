package check

import (
	"slices"

	"p2pfault/event"
)

// Broken reports whether a bound of v had broken on what the run saw: a
// check that failed on pulls that ended (one over a time bound, one not
// 200, a wrong text, a hit rate under its bound) or on pulls in flight
// already older than a time bound (the checks count them at their age so
// far, pending.go). A check that failed only because its window held no
// pull that ended (Empty) has not broken anything: it could not be
// judged yet. A window that could not be judged (NotJudged) breaks
// nothing either. A run cut short with a broken bound is a FAIL; one
// without is interrupted, not judged on windows that never closed.
func Broken(v event.Verdict) bool {
	if len(v.Windows) == 0 {
		return slices.ContainsFunc(v.Checks, brokenCheck)
	}
	for _, w := range v.Windows {
		if WindowBroken(w) {
			return true
		}
	}
	// The run's own checks, over the whole run; the others aggregate the
	// windows' (an aggregate is not Empty when one window held pulls, so
	// it is read window by window above).
	return slices.ContainsFunc(v.Checks, func(c event.Result) bool {
		return runWide(c.Name, v.Windows) && brokenCheck(c)
	})
}

// WindowBroken reports whether a check of a judged window w broke a bound.
func WindowBroken(w event.WindowVerdict) bool {
	return w.NotJudged == "" && slices.ContainsFunc(w.Checks, brokenCheck)
}

func brokenCheck(c event.Result) bool { return !c.Passed && !c.Empty }

// runWide reports whether the run's check name is judged over the whole
// run rather than aggregated from windows: all_200 and fault_took_effect
// (windowOnly drops them from the aggregate), and every check no window
// carries (content_matches).
func runWide(name string, windows []event.WindowVerdict) bool {
	if name == NameAll200 || name == NameFaultTookEffect {
		return true
	}
	for _, w := range windows {
		if slices.ContainsFunc(w.Checks, func(c event.Result) bool { return c.Name == name }) {
			return false
		}
	}
	return true
}
