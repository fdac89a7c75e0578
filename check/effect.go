package check

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
)

// NameFaultTookEffect is the check that every fault action was confirmed on
// the host (package verify) in time.
const NameFaultTookEffect = "fault_took_effect"

// DefaultVerifyWithin is how long a fault action may take to show on the
// host before the run says it did not take effect.
const DefaultVerifyWithin = 2 * time.Second

// FaultTookEffect passes when every action was verified within `within`
// (DefaultVerifyWithin when 0). An action seen later than that, or never,
// fails it, named with its detail. With no action at all it fails as an
// empty check: a run that fired faults passes its verifications here, and
// one that fired none should not include the check.
func FaultTookEffect(vs []event.Verification, within time.Duration) event.Result {
	if within <= 0 {
		within = DefaultVerifyWithin
	}
	r := event.Result{Name: NameFaultTookEffect}
	if len(vs) == 0 {
		r.Empty = true
		r.Detail = "empty: no fault action was verified"
		return r
	}
	var bad []string
	for _, v := range vs {
		switch {
		case !v.Verified:
			bad = append(bad, fmt.Sprintf("%s %s at %s not seen within %s: %s", v.Action, v.TargetName(), secs1(v.At), secs1(within), v.Detail))
		case v.After > within:
			bad = append(bad, fmt.Sprintf("%s %s at %s seen only after %s (bound %s): %s", v.Action, v.TargetName(), secs1(v.At), secs2(v.After), secs1(within), v.Detail))
		}
	}
	if len(bad) > 0 {
		r.Detail = fmt.Sprintf("%d of %d fault actions did not take effect: %s", len(bad), len(vs), strings.Join(bad, "; "))
		return r
	}
	r.Passed = true
	// What each one was seen as: a stall names exactly the pids stopped
	// (and, on one rank, those left running).
	seen := make([]string, len(vs))
	for i, v := range vs {
		seen[i] = fmt.Sprintf("%s %s at %s: %s", v.Action, v.TargetName(), secs1(v.At), v.Detail)
	}
	r.Detail = fmt.Sprintf("all %d fault actions took effect within %s: %s", len(vs), secs1(within), strings.Join(seen, "; "))
	return r
}
