// Package check evaluates the bounds of the fault slice over a run's samples
// and its fault window. Everything here is a pure function of its input: no
// clock, no I/O, so the live dashboard, the headless run and a report rebuilt
// from events.jsonl all reach the same verdict from the same samples.
package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// Median is the middle latency, or the mean of the two middle ones when
// there is an even number; 0 for none. d is not modified.
func Median(d []time.Duration) time.Duration {
	n := len(d)
	if n == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	// Halve each before adding so two huge durations cannot overflow.
	a, b := s[n/2-1], s[n/2]
	return a/2 + b/2 + (a%2+b%2)/2
}

// checkAll200 judges the pulls started in [from, to) (the whole run, or a
// window's span).
func checkAll200(all allSet, pend []inflight, from, to time.Duration) (r event.Result) {
	r = event.Result{Name: NameAll200, Pending: len(pend)}
	if all.n == 0 {
		return unended(r, "decoder request", "decoder requests", "", from, to, pend)
	}
	defer func() {
		if len(pend) > 0 {
			r.Detail += fmt.Sprintf("; %d in flight with no answer yet (oldest %s)", len(pend), secs1(oldestAge(pend)))
		}
	}()
	if all.bad == 0 {
		r.Passed = true
		r.Detail = fmt.Sprintf("all %d decoder requests returned 200", all.n)
		return r
	}
	first := all.first
	why := fmt.Sprintf("status %d", first.Status)
	if first.Err != "" {
		why += ": " + first.Err
	}
	r.Detail = fmt.Sprintf("%d of %d decoder requests did not return 200 (first: source %d at %s: %s)",
		all.bad, all.n, first.Source, secs1(first.Start), why)
	return r
}

func checkFaultedMax(faulted *pullSet, pend []inflight, w event.Window, b event.Bounds) event.Result {
	r := event.Result{Name: NameFaultedBound, Pending: len(pend)}
	slowest := faulted.max
	var msgs []string
	if slowest > b.FaultedMax {
		msgs = append(msgs, fmt.Sprintf("a request naming the faulted source took %s (bound %s)",
			secs1(slowest), secs1(b.FaultedMax)))
	}
	if n, oldest := past(pend, b.FaultedMax); n > 0 {
		msgs = append(msgs, pastMessage(n, "the faulted source", b.FaultedMax, oldest))
	}
	if len(msgs) > 0 {
		r.Detail = strings.Join(msgs, "; ")
		return r
	}
	if faulted.n == 0 {
		return unended(r, "pull", "pulls", " naming the faulted source", w.Start, w.End, pend)
	}
	r.Passed = true
	r.Detail = fmt.Sprintf("%d requests naming the faulted source each ended within %s (max %s)",
		faulted.n, secs1(b.FaultedMax), secs2(slowest)) + inFlightNote(pend)
	return r
}

// checkFaultedMedian counts a pull in flight at its age so far: it will
// take at least that, so the median of these lower bounds is a lower bound
// of the median, and one over the bound has broken it already.
func checkFaultedMedian(after *pullSet, pend []inflight, from time.Duration, w event.Window, b event.Bounds) event.Result {
	r := event.Result{Name: NameFaultedMedian, Pending: len(pend)}
	if after.n == 0 && len(pend) == 0 {
		return emptyResult(r, "no pull naming the faulted source", from, w.End)
	}
	med := after.lat.median(ages(pend))
	r.Passed = med <= b.FaultedMedian
	if len(pend) == 0 {
		r.Detail = fmt.Sprintf("%d requests naming the faulted source from %s on took %s at the median (bound %s)",
			after.n, secs1(from), secs2(med), secs1(b.FaultedMedian))
		return r
	}
	r.Detail = fmt.Sprintf("%d requests naming the faulted source from %s on took at least %s at the median, %d of them in flight counted at their age so far (bound %s)",
		after.n+len(pend), secs1(from), secs2(med), len(pend), secs1(b.FaultedMedian))
	return r
}

func checkHealthy(healthy *pullSet, pend []inflight, w event.Window, b event.Bounds) event.Result {
	r := event.Result{Name: NameHealthy, Pending: len(pend)}
	st := event.Stats{N: healthy.n, Pulled: healthy.hits, Max: healthy.max}
	nPast, oldest := past(pend, b.HealthyMax)
	if st.N == 0 && nPast == 0 {
		return unended(r, "pull", "pulls", " naming a healthy source", w.Start, w.End, pend)
	}
	// A pull in flight may still hit: the rate has failed only when it
	// stays under the bound with every one of them a hit.
	rateOK := atLeast(st.Pulled+len(pend), st.N+len(pend), b.HealthyHitRate)
	maxOK := st.Max <= b.HealthyMax && nPast == 0
	r.Passed = rateOK && maxOK
	if r.Passed {
		r.Detail = fmt.Sprintf("pulls naming a healthy source hit %d of %d (bound %s), max %s (bound %s)",
			st.Pulled, st.N, pctOf(b.HealthyHitRate), secs2(st.Max), secs1(b.HealthyMax)) + inFlightNote(pend)
		return r
	}
	var msgs []string
	if !rateOK {
		m := fmt.Sprintf("pulls naming a healthy source hit %d of %d (%s, bound %s)",
			st.Pulled, st.N, pct(st.Pulled, st.N), pctOf(b.HealthyHitRate))
		if len(pend) > 0 {
			m += fmt.Sprintf(" and the %d in flight cannot lift them to it", len(pend))
		}
		msgs = append(msgs, m)
	}
	if st.Max > b.HealthyMax {
		msgs = append(msgs, fmt.Sprintf("a request naming a healthy source took %s (bound %s)",
			secs1(st.Max), secs1(b.HealthyMax)))
	}
	if nPast > 0 {
		msgs = append(msgs, pastMessage(nPast, "a healthy source", b.HealthyMax, oldest))
	}
	r.Detail = strings.Join(msgs, "; ")
	return r
}

func checkRecovery(rec *pullSet, pend []inflight, from, to time.Duration, b event.Bounds) event.Result {
	r := event.Result{Name: NameRecovery, Pending: len(pend)}
	if rec.n == 0 {
		return unended(r, "pull", "pulls", " naming the faulted source", from, to, pend)
	}
	st := event.Stats{N: rec.n, Pulled: rec.hits}
	r.Passed = atLeast(st.Pulled+len(pend), st.N+len(pend), b.RecoveryHitRate)
	r.Detail = fmt.Sprintf("after the fault window, %d of %d pulls naming the faulted source hit (%s, bound %s)",
		st.Pulled, st.N, pct(st.Pulled, st.N), pctOf(b.RecoveryHitRate))
	switch {
	case len(pend) > 0 && r.Passed:
		r.Detail += inFlightNote(pend)
	case len(pend) > 0:
		r.Detail += fmt.Sprintf(" and the %d in flight cannot lift them to it", len(pend))
	}
	return r
}

func emptyResult(r event.Result, what string, from, to time.Duration) event.Result {
	r.Passed = false
	r.Empty = true
	r.Detail = fmt.Sprintf("empty window: %s started in [%s, %s)", what, secs1(from), secs1(to))
	return r
}

// unended is the result of a check none of whose pulls ended: empty (it
// judges nothing yet), and said so in words that count the pulls it holds
// in flight, all started in [from, to) (a window with pulls in flight is
// not a window without pulls). one and many are the noun ("pull" and
// "pulls", "decoder request" and "decoder requests"), of is what it names.
func unended(r event.Result, one, many, of string, from, to time.Duration, pend []inflight) event.Result {
	if len(pend) == 0 {
		return emptyResult(r, "no "+one+of, from, to)
	}
	r.Passed = false
	r.Empty = true
	noun, verb := one, "is"
	if len(pend) > 1 {
		noun, verb = many, "are"
	}
	r.Detail = fmt.Sprintf("none ended yet: %d %s%s started in [%s, %s) %s in flight, oldest %s",
		len(pend), noun, of, secs1(from), secs1(to), verb, secs1(oldestAge(pend)))
	return r
}

// inWindow is the half-open [from, to): a pull sent at the instant the
// window closes belongs to what follows it.
func inWindow(t, from, to time.Duration) bool { return t >= from && t < to }

// atLeast reports hits/n >= rate. The tolerance keeps a count exactly at the
// bound (9 of 10 at 0.90) from failing on float rounding of rate*n.
func atLeast(hits, n int, rate float64) bool {
	return float64(hits) >= rate*float64(n)-1e-9
}

func cmpStart(a, b event.Sample) int {
	if c := cmp.Compare(a.Start, b.Start); c != 0 {
		return c
	}
	return cmp.Compare(a.Trial, b.Trial)
}

func secs1(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
func secs2(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func pct(k, n int) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(k)/float64(n))
}

func pctOf(rate float64) string { return fmt.Sprintf("%.0f%%", 100*rate) }
