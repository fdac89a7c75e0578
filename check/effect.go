package check

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/probe"
)

// NameFaultTookEffect is the check that every fault action was confirmed on
// the host (package verify) in time.
const NameFaultTookEffect = "fault_took_effect"

// DefaultVerifyWithin is how long a fault action may take to show on the
// host before the run says it did not take effect.
const DefaultVerifyWithin = 2 * time.Second

// Verification is what became of one fault action: whether its effect was
// seen on the host (every member of a stalled session in state T, ...) and
// how long after the action.
type Verification struct {
	Action   string        `json:"action"` // stall, resume, kill, remove, ...
	Source   int           `json:"source"`
	At       time.Duration `json:"at_ns"`    // the action, since t0
	Verified bool          `json:"verified"` // the effect was seen
	After    time.Duration `json:"after_ns"` // from the action until seen, or until verification gave up
	Detail   string        `json:"detail"`   // what was seen, e.g. "2 of 2 processes of session 4242 in state T"
}

// FaultTookEffect passes when every action was verified within `within`
// (DefaultVerifyWithin when 0). An action seen later than that, or never,
// fails it, named with its detail. With no action at all it fails as an
// empty check: a run that fired faults passes its verifications here, and
// one that fired none should not include the check.
func FaultTookEffect(vs []Verification, within time.Duration) Result {
	if within <= 0 {
		within = DefaultVerifyWithin
	}
	r := Result{Name: NameFaultTookEffect}
	if len(vs) == 0 {
		r.Empty = true
		r.Detail = "empty: no fault action was verified"
		return r
	}
	var bad []string
	for _, v := range vs {
		switch {
		case !v.Verified:
			bad = append(bad, fmt.Sprintf("%s source-%d at %s not seen within %s: %s", v.Action, v.Source, secs1(v.At), secs1(within), v.Detail))
		case v.After > within:
			bad = append(bad, fmt.Sprintf("%s source-%d at %s seen only after %s (bound %s): %s", v.Action, v.Source, secs1(v.At), secs2(v.After), secs1(within), v.Detail))
		}
	}
	if len(bad) > 0 {
		r.Detail = fmt.Sprintf("%d of %d fault actions did not take effect: %s", len(bad), len(vs), strings.Join(bad, "; "))
		return r
	}
	r.Passed = true
	r.Detail = fmt.Sprintf("all %d fault actions took effect within %s", len(vs), secs1(within))
	return r
}

// WithFaultChecks adds to v what a run that fired a fault is judged on
// besides the seed's checks: the judged window's detect and recover times
// (Times) and, when any fault action was verified, fault_took_effect.
// The experiment and `p2pfault report` both call it.
func WithFaultChecks(v Verdict, samples []probe.Sample, w Window, b Bounds, vs []Verification) Verdict {
	t := FaultTimes(samples, w, b)
	v.Times = &t
	if len(vs) > 0 {
		r := FaultTookEffect(vs, 0)
		v.Checks = append(append([]Result(nil), v.Checks...), r)
		v.Passed = v.Passed && r.Passed
	}
	return v
}
