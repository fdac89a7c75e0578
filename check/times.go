package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"p2pfault/event"
)

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

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// The two times are defined so that each is one pass over the pulls naming
// the faulted source in start order, plus the pulls still in flight: what
// a running accumulator can keep per fault window without holding the
// samples (detectAcc, recoverAcc). Evaluated here over a run's samples,
// they are sorted first; an accumulator fed live must meet them in start
// order too, which the probe's schedule gives but their ends do not.

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
		switch {
		case p.pending && p.age > b.FaultedMedian:
			acc.bad(p.start)
		case p.pending:
		case p.status != 200 || p.latency > b.FaultedMedian:
			acc.bad(p.start)
		default:
			acc.good(p.start)
		}
	}
	if !acc.found {
		return 0, false
	}
	return acc.at - w.Start, true
}

// detectAcc is Detect's state: O(1), whatever the number of pulls.
type detectAcc struct {
	lastBad time.Duration
	sawBad  bool
	at      time.Duration // the first good start after lastBad
	found   bool
}

func (a *detectAcc) bad(start time.Duration) {
	a.lastBad, a.sawBad, a.found = start, true, false
}

func (a *detectAcc) good(start time.Duration) {
	// A good pull sent at the same instant as a bad one is not "from
	// then on": the bad one was sent then too.
	if !a.found && (!a.sawBad || start > a.lastBad) {
		a.at, a.found = start, true
	}
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

// recoverAcc is Recover's state. With h hits in the first n pulls, let
// f(n) = h - rate×n: the pulls from the (n+1)-th on hit at least at the
// rate exactly when f(n) <= f(N), N being all of them. The earliest hit
// that qualifies is therefore among the hits before which f reached a new
// low, and those are all it keeps: one per run of misses that went lower
// than any before (none while the source hits at the rate), not one per
// pull.
type recoverAcc struct {
	rate float64
	h, n int
	lows []recoverLow // f strictly falling, starts rising
}

type recoverLow struct {
	start time.Duration
	f     float64
}

func (a *recoverAcc) f() float64 { return float64(a.h) - a.rate*float64(a.n) }

func (a *recoverAcc) add(start time.Duration, hit bool) {
	if hit {
		if f := a.f(); len(a.lows) == 0 || f < a.lows[len(a.lows)-1].f {
			a.lows = append(a.lows, recoverLow{start: start, f: f})
		}
		a.h++
	}
	a.n++
}

func (a *recoverAcc) result() (time.Duration, bool) {
	final := a.f()
	for _, l := range a.lows {
		// The same tolerance as atLeast: 9 of 10 at 0.90 is at the bound.
		if final-l.f >= -1e-9 {
			return l.start, true
		}
	}
	return 0, false
}

// timedPull is a pull naming the faulted source as Detect and Recover read
// it: ended (status, latency, hit) or in flight (age).
type timedPull struct {
	start, latency, age time.Duration
	status              int
	hit, pending        bool
	trial               int64
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

// FormatSeconds shows a time of event.Times as "12.34s", or "–" when it is nil.
func FormatSeconds(s *float64) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%.2fs", *s)
}
