// Package check evaluates the bounds of the fault slice over a run's samples
// and its fault window. Everything here is a pure function of its input: no
// clock, no I/O, so the live dashboard, the headless run and a report rebuilt
// from events.jsonl all reach the same verdict from the same samples.
package check

import (
	"cmp"
	"fmt"
	"p2pfault/event"
	"slices"
	"strings"
	"time"
)

// Evaluate runs the checks of the slice over in.Samples: all_200,
// faulted_max, faulted_median_after_detect, healthy_keeps_hitting, when
// in.Window.Recovers recovery_hits_again, and when in.Content is on
// content_matches (over every pull of the run). A check whose window holds no pull
// fails with Empty set: an empty window proves nothing, so it must never pass
// silently.
//
// Pulls cut short by an early end of the run (event.Sample.Aborted) never
// got an answer, so they are not judged, with one exception: a pull naming
// the faulted source that had already waited longer than the faulted_max
// bound when it was cut has failed that check, however it would have ended.
func Evaluate(in Input) event.Verdict {
	w := in.Window
	b := in.Bounds

	answered := selectPulls(in.Samples, func(s event.Sample) bool { return !s.Aborted })
	cut := selectPulls(in.Samples, func(s event.Sample) bool { return s.Aborted && inWindow(s.Start, 0, in.RunEnd) })
	cutFaulted := selectPulls(cut, func(s event.Sample) bool {
		return s.Source == w.Source && inWindow(s.Start, w.Start, w.End)
	})

	all := selectPulls(answered, func(s event.Sample) bool {
		return inWindow(s.Start, 0, in.RunEnd)
	})
	faulted := selectPulls(answered, func(s event.Sample) bool {
		return s.Source == w.Source && inWindow(s.Start, w.Start, w.End)
	})
	detectFrom := w.Start + b.DetectAfter
	afterDetect := selectPulls(faulted, func(s event.Sample) bool { return s.Start >= detectFrom })
	healthy := selectPulls(answered, func(s event.Sample) bool {
		return s.Source != w.Source && inWindow(s.Start, w.Start, w.End)
	})
	recEnd := min(w.End+b.RecoveryWindow, in.RunEnd)
	recovery := selectPulls(answered, func(s event.Sample) bool {
		return s.Source == w.Source && inWindow(s.Start, w.End, recEnd)
	})

	checks := []event.Result{
		checkAll200(all, len(cut), in.RunEnd),
		checkFaultedMax(faulted, cutFaulted, w, b),
		checkFaultedMedian(afterDetect, detectFrom, w, b),
		checkHealthy(healthy, w, b),
	}
	if w.Recovers {
		checks = append(checks, checkRecovery(recovery, w.End, recEnd, b))
	}
	if in.Content.On {
		checks = append(checks, ContentMatches(answered, in.Content))
	}

	passed := true
	for _, c := range checks {
		passed = passed && c.Passed
	}
	sum := event.Summary{Faulted: Summarize(faulted), Healthy: Summarize(healthy)}
	if w.Recovers {
		sum.Recovery = Summarize(recovery)
	}
	return event.Verdict{Passed: passed, Checks: checks, Summary: sum}
}

// Summarize gives the count, hits, median and maximum latency of pulls.
func Summarize(pulls []event.Sample) event.Stats {
	st := event.Stats{N: len(pulls)}
	lat := make([]time.Duration, 0, len(pulls))
	for _, s := range pulls {
		if s.Hit() {
			st.Pulled++
		}
		lat = append(lat, s.Latency)
	}
	st.P50 = Median(lat)
	if len(lat) > 0 {
		st.Max = slices.Max(lat)
	}
	return st
}

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

func checkAll200(all []event.Sample, cut int, runEnd time.Duration) (r event.Result) {
	r = event.Result{Name: NameAll200}
	defer func() {
		if cut > 0 {
			r.Detail += fmt.Sprintf("; %d still in flight when the run ended early, not judged", cut)
		}
	}()
	if len(all) == 0 {
		return emptyResult(r, "no decoder request", 0, runEnd)
	}
	var bad []event.Sample
	for _, s := range all {
		if s.Status != 200 {
			bad = append(bad, s)
		}
	}
	if len(bad) == 0 {
		r.Passed = true
		r.Detail = fmt.Sprintf("all %d decoder requests returned 200", len(all))
		return r
	}
	first := slices.MinFunc(bad, func(a, b event.Sample) int { return cmpStart(a, b) })
	why := fmt.Sprintf("status %d", first.Status)
	if first.Err != "" {
		why += ": " + first.Err
	}
	r.Detail = fmt.Sprintf("%d of %d decoder requests did not return 200 (first: source %d at %s: %s)",
		len(bad), len(all), first.Source, secs1(first.Start), why)
	return r
}

func checkFaultedMax(faulted, cut []event.Sample, w event.Window, b event.Bounds) event.Result {
	r := event.Result{Name: NameFaultedBound}
	byLatency := func(a, b event.Sample) int { return cmp.Compare(a.Latency, b.Latency) }
	var slowest event.Sample
	if len(faulted) > 0 {
		slowest = slices.MaxFunc(faulted, byLatency)
	}
	if slowest.Latency > b.FaultedMax {
		r.Detail = fmt.Sprintf("a request naming the faulted source took %s (bound %s)",
			secs1(slowest.Latency), secs1(b.FaultedMax))
		return r
	}
	if len(cut) > 0 {
		if waited := slices.MaxFunc(cut, byLatency); waited.Latency > b.FaultedMax {
			r.Detail = fmt.Sprintf("a request naming the faulted source was still waiting after %s when the run ended (bound %s)",
				secs1(waited.Latency), secs1(b.FaultedMax))
			return r
		}
	}
	if len(faulted) == 0 {
		return emptyResult(r, "no pull naming the faulted source", w.Start, w.End)
	}
	r.Passed = true
	r.Detail = fmt.Sprintf("%d requests naming the faulted source each ended within %s (max %s)",
		len(faulted), secs1(b.FaultedMax), secs2(slowest.Latency))
	return r
}

func checkFaultedMedian(after []event.Sample, from time.Duration, w event.Window, b event.Bounds) event.Result {
	r := event.Result{Name: NameFaultedMedian}
	if len(after) == 0 {
		return emptyResult(r, "no pull naming the faulted source", from, w.End)
	}
	lat := make([]time.Duration, len(after))
	for i, s := range after {
		lat[i] = s.Latency
	}
	med := Median(lat)
	r.Passed = med <= b.FaultedMedian
	r.Detail = fmt.Sprintf("%d requests naming the faulted source from %s on took %s at the median (bound %s)",
		len(after), secs1(from), secs2(med), secs1(b.FaultedMedian))
	return r
}

func checkHealthy(healthy []event.Sample, w event.Window, b event.Bounds) event.Result {
	r := event.Result{Name: NameHealthy}
	if len(healthy) == 0 {
		return emptyResult(r, "no pull naming a healthy source", w.Start, w.End)
	}
	st := Summarize(healthy)
	rateOK := atLeast(st.Pulled, st.N, b.HealthyHitRate)
	maxOK := st.Max <= b.HealthyMax
	r.Passed = rateOK && maxOK
	var msgs []string
	if !rateOK {
		msgs = append(msgs, fmt.Sprintf("pulls naming a healthy source hit %d of %d (%s, bound %s)",
			st.Pulled, st.N, pct(st.Pulled, st.N), pctOf(b.HealthyHitRate)))
	}
	if !maxOK {
		msgs = append(msgs, fmt.Sprintf("a request naming a healthy source took %s (bound %s)",
			secs1(st.Max), secs1(b.HealthyMax)))
	}
	if r.Passed {
		r.Detail = fmt.Sprintf("pulls naming a healthy source hit %d of %d (bound %s), max %s (bound %s)",
			st.Pulled, st.N, pctOf(b.HealthyHitRate), secs2(st.Max), secs1(b.HealthyMax))
		return r
	}
	r.Detail = strings.Join(msgs, "; ")
	return r
}

func checkRecovery(rec []event.Sample, from, to time.Duration, b event.Bounds) event.Result {
	r := event.Result{Name: NameRecovery}
	if len(rec) == 0 {
		return emptyResult(r, "no pull naming the faulted source", from, to)
	}
	st := Summarize(rec)
	r.Passed = atLeast(st.Pulled, st.N, b.RecoveryHitRate)
	r.Detail = fmt.Sprintf("after the fault window, %d of %d pulls naming the faulted source hit (%s, bound %s)",
		st.Pulled, st.N, pct(st.Pulled, st.N), pctOf(b.RecoveryHitRate))
	return r
}

func emptyResult(r event.Result, what string, from, to time.Duration) event.Result {
	r.Passed = false
	r.Empty = true
	r.Detail = fmt.Sprintf("empty window: %s started in [%s, %s)", what, secs1(from), secs1(to))
	return r
}

// inWindow is the half-open [from, to): a pull sent at the instant the
// window closes belongs to what follows it.
func inWindow(t, from, to time.Duration) bool { return t >= from && t < to }

func selectPulls(in []event.Sample, keep func(event.Sample) bool) []event.Sample {
	var out []event.Sample
	for _, s := range in {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

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
