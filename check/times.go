package check

import (
	"fmt"
	"slices"
	"time"
)

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// A fault window's two times (event.Times):
//
// detect_s is the time from the fault action (the window's start) to the
// start of the first pull naming the faulted source from which on every
// pull started until the window closed returned 200 within the
// faulted_median bound (inclusive): the decoder stopped waiting on the
// faulted source and kept not waiting. None ("not detected") when there is
// no such pull: on vLLM main a stalled source's pulls wait on a
// reconnect's handshake until the window closes. A pull is bad when it
// returned anything but 200, took longer than the bound, or is in flight
// past it; detect is the first good pull started after the last bad one.
// A pull in flight younger than the bound is neither: it breaks nothing
// yet, and is no evidence of detection either.
//
// recover_s is the time from the end of the window (SIGCONT, or the
// restarted source ready) to the start of the first pull naming the
// faulted source, started from then on, that hit and from which on at
// least the recovery bound's share of the pulls naming it hit, until the
// run's end (or the next window's start). None for a window that does not
// recover (remove) or when no such pull exists. Pulls in flight have not
// hit or missed yet and are left out.
//
// Both are defined so that each is one pass over the pulls naming the
// faulted source in start order, plus the pulls still in flight: what a
// running accumulator can keep per fault window without holding the
// samples (detectAcc, recoverAcc). The judge meets the pulls in start
// order (it judges a pull once every pull started before it ended), which
// the probe's schedule gives but their ends do not; the tests' oracle
// (Detect, Recover) sorts a run's samples first.

// feed takes the next pull naming the faulted source, in start order.
func (a *detectAcc) feed(p timedPull, bound time.Duration) {
	switch {
	case p.pending && p.age > bound:
		a.bad(p.start)
	case p.pending:
	case p.status != 200 || p.latency > bound:
		a.bad(p.start)
	default:
		a.good(p.start)
	}
}

// result is detect_s of a window that opened at from.
func (a *detectAcc) result(from time.Duration) (time.Duration, bool) {
	if !a.found {
		return 0, false
	}
	return a.at - from, true
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

// clone is a copy sharing nothing with a.
func (a *recoverAcc) clone() recoverAcc {
	c := *a
	c.lows = slices.Clone(a.lows)
	return c
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

// FormatSeconds shows a time of event.Times as "12.34s", or "–" when it is nil.
func FormatSeconds(s *float64) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%.2fs", *s)
}
