package check

// The tests' oracle: a second judge, written apart from Judge, that
// selects a run's pulls anew for one fault window (Evaluate, with
// WithFaultChecks' detect_s, recover_s and fault_took_effect, and each
// source's steady state: Steady). The judge's tests feed both the same
// streams and compare their verdicts (windows_test.go); the checks'
// own tests read it for one window's verdict. It is deliberately not the
// judge's way (the judge keeps running figures and assigns each pull once,
// in start order): the two agreeing is the evidence that the judge's
// bookkeeping selects what the bounds of the slice say.

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/event"
)

// Evaluate runs the checks of the slice over in.Samples and in.Pending:
// all_200, faulted_max, faulted_median_after_detect, healthy_keeps_hitting,
// when in.Window.Recovers recovery_hits_again, and when in.Content is on
// content_matches (over every pull of the run that ended: one in flight
// has no text yet, and no text can break that check early). A check whose
// window holds no pull fails with Empty set: an empty window proves
// nothing, so it must never pass silently.
//
// Pulls in flight (in.Pending, and samples cut short by the run's end) are
// counted by their age so far, live and at the end alike: a check whose
// bound they have already broken fails at once (60 pulls hanging for 29 s
// have broken a 15 s bound, however they end), and a check they could
// still pass or fail counts them as what they may yet be: a median with
// their ages as lower bounds, a hit rate that fails only when no outcome of
// theirs could lift it to the bound. all_200 does not fail on them (they
// may still return 200) and says how many there are.
func Evaluate(in Input) event.Verdict {
	w := in.Window
	b := in.Bounds
	ended, pending := split(in)

	inRun := func(start time.Duration) bool { return inWindow(start, 0, in.RunEnd) }
	isFaulted := func(src int, start time.Duration) bool {
		return src == w.Source && inWindow(start, w.Start, w.End)
	}
	detectFrom := w.Start + b.DetectAfter
	isHealthy := func(src int, start time.Duration) bool {
		return src != w.Source && inWindow(start, w.Start, w.End)
	}
	recEnd := min(w.End+b.RecoveryWindow, in.RunEnd)
	isRecovery := func(src int, start time.Duration) bool {
		return src == w.Source && inWindow(start, w.End, recEnd)
	}

	all := only(ended, func(s event.Sample) bool { return inRun(s.Start) })
	allP := selectInflight(pending, func(p inflight) bool { return inRun(p.Start) })
	faulted := only(ended, func(s event.Sample) bool { return isFaulted(s.Source, s.Start) })
	faultedP := selectInflight(pending, func(p inflight) bool { return isFaulted(p.Source, p.Start) })
	afterDetect := only(faulted, func(s event.Sample) bool { return s.Start >= detectFrom })
	afterDetectP := selectInflight(faultedP, func(p inflight) bool { return p.Start >= detectFrom })
	healthy := only(ended, func(s event.Sample) bool { return isHealthy(s.Source, s.Start) })
	healthyP := selectInflight(pending, func(p inflight) bool { return isHealthy(p.Source, p.Start) })
	recovery := only(ended, func(s event.Sample) bool { return isRecovery(s.Source, s.Start) })
	recoveryP := selectInflight(pending, func(p inflight) bool { return isRecovery(p.Source, p.Start) })

	fs, hs, rs := setOf(faulted), setOf(healthy), setOf(recovery)
	ads := setOf(afterDetect)
	checks := []event.Result{
		checkAll200(allOf(all), allP, 0, in.RunEnd),
		checkFaultedMax(&fs, faultedP, w, b),
		checkFaultedMedian(&ads, afterDetectP, detectFrom, w, b),
		checkHealthy(&hs, healthyP, w, b),
	}
	if w.Recovers {
		checks = append(checks, checkRecovery(&rs, recoveryP, w.End, recEnd, b))
	}
	if in.Content.On {
		checks = append(checks, ContentMatches(ended, in.Content))
	}

	passed := true
	for _, c := range checks {
		passed = passed && c.Passed
	}
	sum := event.Summary{Faulted: fs.stats(), Healthy: hs.stats(), AfterDetect: ads.stats()}
	if w.Recovers {
		sum.Recovery = rs.stats()
	}
	return event.Verdict{Passed: passed, Checks: checks, Summary: sum}
}

// Steady is each source's summary over the pulls of in started in
// [0, in.RunEnd) outside every one of windows (a window still open, End 0,
// runs to in.RunEnd): for a run without a fault, the whole run; for a run
// with faults, its steady state around them. Pulls in flight (in.Pending,
// and those cut short) are counted as such, not as errors. Every source
// of 0..sources-1 gets a line, also one no pull named; a sample naming a
// source out of that range gets one too.
func Steady(in Input, windows []event.Window, sources int) []event.SourceSummary {
	// outside: in no fault window, and in no recovery window of a window
	// on the pull's own source (to the recovery bound after it, cut at the
	// next window's start and at the run's end).
	outside := func(src int, start time.Duration) bool {
		if !inWindow(start, 0, in.RunEnd) {
			return false
		}
		for _, w := range windows {
			end := w.End
			if end == 0 {
				end = in.RunEnd
			}
			if inWindow(start, w.Start, end) {
				return false
			}
			if w.Source != src || w.End == 0 || !w.Recovers {
				continue
			}
			recEnd := min(w.End+in.Bounds.RecoveryWindow, in.RunEnd)
			for _, o := range windows {
				if o.Start >= w.End {
					recEnd = min(recEnd, o.Start)
				}
			}
			if inWindow(start, w.End, recEnd) {
				return false
			}
		}
		return true
	}
	by := map[int]*Figures{}
	get := func(src int) *Figures {
		f := by[src]
		if f == nil {
			f = NewFigures()
			by[src] = f
		}
		return f
	}
	for i := range sources {
		get(i)
	}
	for _, s := range in.Samples {
		if outside(s.Source, s.Start) {
			get(s.Source).Add(s)
		}
	}
	for _, p := range in.Pending {
		if outside(p.Source, p.Start) {
			get(p.Source).AddInFlight()
		}
	}
	out := make([]event.SourceSummary, 0, len(by))
	for src, f := range by {
		out = append(out, f.Summary(src))
	}
	slices.SortFunc(out, func(a, b event.SourceSummary) int { return cmp.Compare(a.Source, b.Source) })
	return out
}

// WithFaultChecks adds to v what a run that fired a fault is judged on
// besides the seed's checks: the judged window's detect and recover times
// (event.Times) and, when any fault action was verified, fault_took_effect.
// The experiment and `p2pfault report` both call it.
func WithFaultChecks(v event.Verdict, in Input, vs []event.Verification) event.Verdict {
	t := FaultTimes(in)
	v.Times = &t
	if len(vs) > 0 {
		r := FaultTookEffect(vs, 0)
		v.Checks = append(append([]event.Result(nil), v.Checks...), r)
		v.Passed = v.Passed && r.Passed
	}
	return v
}

// FaultTimes gives detect_s (Detect) and recover_s (Recover) of the fault
// window in.Window, over in's pulls that ended and those in flight.
func FaultTimes(in Input) event.Times {
	var t event.Times
	if d, ok := Detect(in); ok {
		t.DetectS = seconds(d)
	}
	if d, ok := Recover(in); ok {
		t.RecoverS = seconds(d)
	}
	return t
}

// Detect is detect_s of the window w = in.Window: the time from the fault
// action (w.Start) to the start of the first pull naming the faulted
// source from which on every pull started until the window closed
// returned 200 within the faulted_median bound (inclusive): the decoder
// stopped waiting on the faulted source and kept not waiting. ok is false
// when there is no such pull ("not detected"): on vLLM main a stalled
// source's pulls wait on a reconnect's handshake until the window closes.
//
// A pull is bad when it returned anything but 200, took longer than the
// bound, or is in flight past it; detect is the first good pull started
// after the last bad one. A pull in flight younger than the bound is
// neither: it breaks nothing yet, and is no evidence of detection either.
func Detect(in Input) (d time.Duration, ok bool) {
	w, b := in.Window, in.Bounds
	var acc detectAcc
	for _, p := range faultedInStartOrder(in, w.Start, w.End) {
		acc.feed(p, b.FaultedMedian)
	}
	return acc.result(w.Start)
}

// Recover is recover_s of the window w = in.Window: the time from the end
// of the window (SIGCONT, or the restarted source ready) to the start of
// the first pull naming the faulted source, started from then on, that hit
// and from which on at least the recovery bound's share of the pulls
// naming it hit, until the run's end (in.RunEnd). ok is false for a window
// that does not recover (remove) or when no such pull exists. Pulls in
// flight have not hit or missed yet and are left out.
func Recover(in Input) (d time.Duration, ok bool) {
	w := in.Window
	if !w.Recovers {
		return 0, false
	}
	acc := recoverAcc{rate: in.Bounds.RecoveryHitRate}
	for _, p := range faultedInStartOrder(in, w.End, in.RunEnd) {
		if !p.pending {
			acc.add(p.start, p.hit)
		}
	}
	at, ok := acc.result()
	if !ok {
		return 0, false
	}
	return at - w.End, true
}

// faultedInStartOrder is the pulls naming in.Window's source started in
// [from, to), ended and in flight, in start order.
func faultedInStartOrder(in Input, from, to time.Duration) []timedPull {
	src := in.Window.Source
	now := in.Now
	if now == 0 {
		now = in.RunEnd
	}
	var out []timedPull
	for _, s := range in.Samples {
		if s.Source != src || !inWindow(s.Start, from, to) {
			continue
		}
		if s.Aborted {
			out = append(out, timedPull{start: s.Start, age: max(s.Latency, 0), pending: true, trial: s.Trial})
			continue
		}
		out = append(out, timedPull{start: s.Start, latency: s.Latency, status: s.Status, hit: s.Hit(), trial: s.Trial})
	}
	for _, p := range in.Pending {
		if p.Source == src && inWindow(p.Start, from, to) {
			out = append(out, timedPull{start: p.Start, age: max(now-p.Start, 0), pending: true, trial: p.Trial})
		}
	}
	slices.SortFunc(out, func(a, b timedPull) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(a.trial, b.trial)
	})
	return out
}

// split sorts in's pulls into the ones that ended (with an answer, an
// error or a timeout) and the ones in flight.
func split(in Input) (ended []event.Sample, pending []inflight) {
	now := in.Now
	if now == 0 {
		now = in.RunEnd
	}
	for _, s := range in.Samples {
		if s.Aborted {
			pending = append(pending, inflight{Source: s.Source, Start: s.Start, Age: max(s.Latency, 0)})
			continue
		}
		ended = append(ended, s)
	}
	for _, p := range in.Pending {
		pending = append(pending, inflight{Source: p.Source, Start: p.Start, Age: max(now-p.Start, 0)})
	}
	return ended, pending
}

func selectInflight(in []inflight, keep func(inflight) bool) []inflight {
	var out []inflight
	for _, p := range in {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// Input is everything the checks look at: pure data, no I/O.
type Input struct {
	// Samples are the pulls that ended, and those cut short by the run's
	// end (event.Sample.Aborted: in flight, aged by their Latency).
	Samples []event.Sample
	// Pending are the pulls sent and not ended at Now (pull_start events
	// without their sample); none may share a trial with a sample.
	Pending []event.PullStart
	// Now is when Pending's ages are read, since t0: the live verdict's
	// moment, or a stream's last timestamp; RunEnd when 0.
	Now    time.Duration
	Window event.Window
	RunEnd time.Duration // when the probe stopped sending, since t0
	Bounds event.Bounds
	// Content is the content check's rule; off (the zero value) leaves
	// content_matches out.
	Content ContentRule
}

// setOf is the pullSet of pulls.
func setOf(pulls []event.Sample) pullSet {
	var p pullSet
	for _, s := range pulls {
		p.add(s)
	}
	return p
}

func allOf(pulls []event.Sample) allSet {
	var a allSet
	for _, s := range pulls {
		a.add(s)
	}
	return a
}
