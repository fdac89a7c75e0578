package check

import (
	"fmt"
	"time"

	"p2pfault/event"
)

// inflight is a pull in flight as the checks see it: sent, not answered,
// with its age so far. It comes from a pull_start without its sample
// (Judge.Started, aged at the verdict's now) or from a sample cut short by the
// run's end (event.Sample.Aborted, aged by its Latency: how long it had
// waited when it was cut). Either way its outcome is unknown; only its age
// is a fact, and an age past a bound has broken that bound, whatever the
// pull does next.
type inflight struct {
	Source int
	Start  time.Duration
	Age    time.Duration
}

// past is the pulls of in whose age is over bound, and the oldest age.
func past(in []inflight, bound time.Duration) (n int, oldest time.Duration) {
	for _, p := range in {
		if p.Age > bound {
			n++
			oldest = max(oldest, p.Age)
		}
	}
	return n, oldest
}

func oldestAge(in []inflight) time.Duration {
	var o time.Duration
	for _, p := range in {
		o = max(o, p.Age)
	}
	return o
}

// inFlightNote is the part of a detail that tells the pulls in flight a
// check counted without them breaking its bound.
func inFlightNote(in []inflight) string {
	if len(in) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d in flight, oldest %s", len(in), secs1(oldestAge(in)))
}

// pastMessage is the detail of pulls in flight past a time bound, e.g.
// "60 requests naming the faulted source are in flight past 15.0s
// (oldest 29.0s)".
func pastMessage(n int, what string, bound, oldest time.Duration) string {
	verb := "are"
	noun := "requests"
	if n == 1 {
		verb, noun = "is", "request"
	}
	return fmt.Sprintf("%d %s naming %s %s in flight past %s (oldest %s)", n, noun, what, verb, secs1(bound), secs1(oldest))
}

// Crossed reports whether a pull of pending, still in flight at to, broke
// one of the time bounds of the window w in (from, to]: a pull naming the
// faulted source sent in the window crosses faulted_median (detect_s and
// the median count it as slow from then on) and faulted_max, one naming
// another source healthy_max. The experiment asks it every frame, so a
// live verdict is sent the moment a hanging pull turns a check red rather
// than at the next second's.
func Crossed(pending []event.PullStart, w event.Window, b event.Bounds, from, to time.Duration) bool {
	cross := func(start, bound time.Duration) bool {
		at := start + bound // broken once the age is over the bound: after at
		return at >= from && at < to
	}
	for _, p := range pending {
		if !inFault(w, p.Start) {
			continue
		}
		if p.Source == w.Source {
			if cross(p.Start, b.FaultedMedian) || cross(p.Start, b.FaultedMax) {
				return true
			}
		} else if cross(p.Start, b.HealthyMax) {
			return true
		}
	}
	return false
}
