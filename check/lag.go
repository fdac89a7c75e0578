package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// When p2pfault itself falls behind (a loaded machine, a cluster too large
// for its cores: issue #41), it sends trials late against their slots
// (event.Sample.Late) and reads their answers late, so a latency measures
// its own lag as much as the engines'. Lag only ever makes a pull look
// slower or later, never faster: a check that held with lagged trials in
// its span holds, but one that failed may have failed on p2pfault's lag
// alone, so it is not judged (exit 3) rather than failing a healthy
// source.

// SelfLag is the trials of a span that p2pfault sent late.
type SelfLag struct {
	N     int           // trials sent probe.LateAfter or more after their slot
	Worst time.Duration // the latest of them
}

func (l *SelfLag) add(s event.Sample) {
	if s.Late > 0 {
		l.N, l.Worst = l.N+1, max(l.Worst, s.Late)
	}
}

// SelfLagOf is the lag of samples.
func SelfLagOf(samples []event.Sample) SelfLag {
	var l SelfLag
	for _, s := range samples {
		l.add(s)
	}
	return l
}

// String is how the verdict says it: "p2pfault lagged 640 ms on 12 trials".
func (l SelfLag) String() string {
	return fmt.Sprintf("p2pfault lagged %d ms on %d trials", l.Worst.Milliseconds(), l.N)
}

// laggedChecks are a window's checks with those that failed where
// p2pfault lagged (lags: the lag of each check's own pulls, by name) said
// to be not judged, and why the window is not judged. A failed check
// whose pulls held no lagged trial (all_200's status, a faulted pull that
// hung 30 s with no lag about it) failed on the cluster: the checks stay
// as they are and the window fails.
func laggedChecks(checks []event.Result, lags map[string]SelfLag) (string, []event.Result) {
	var all SelfLag
	out := slices.Clone(checks)
	for i, c := range checks {
		if c.Passed {
			continue
		}
		l := lags[c.Name]
		if l.N == 0 {
			return "", checks
		}
		out[i] = l.mark(c)
		all.N, all.Worst = all.N+l.N, max(all.Worst, l.Worst)
	}
	if all.N == 0 {
		return "", checks
	}
	return all.String() + " (sent that late against their slots): the bounds it failed may be p2pfault's own lag, not the cluster's", out
}

// mark says in c's detail that it is not judged for the lag.
func (l SelfLag) mark(c event.Result) event.Result {
	c.Detail = notJudgedWord + l.String() + " (" + c.Detail + ")"
	return c
}

// notJudgedWord starts the detail of a check not judged for p2pfault's lag.
const notJudgedWord = "not judged: "

// laggedOut is r, a check judged over samples: when it failed with lagged
// trials among them, its detail says it is not judged (LaggedOut).
func laggedOut(r event.Result, samples []event.Sample) event.Result {
	l := SelfLagOf(samples)
	if r.Passed || l.N == 0 {
		return r
	}
	return l.mark(r)
}

// LaggedOut says whether r, a decoder check, failed only where p2pfault
// lagged (laggedOut): the verdict counts it not judged, not failed.
func LaggedOut(r event.Result) bool {
	return !r.Passed && strings.HasPrefix(r.Detail, notJudgedWord)
}
