package check

import (
	"fmt"
	"p2pfault/event"
	"time"
)

// FaultTimes gives detect_s (Detect) and recover_s (Recover) of the fault
// window w.
func FaultTimes(samples []event.Sample, w event.Window, b event.Bounds) event.Times {
	var t event.Times
	if d, ok := Detect(samples, w, b); ok {
		t.DetectS = seconds(d)
	}
	if d, ok := Recover(samples, w); ok {
		t.RecoverS = seconds(d)
	}
	return t
}

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// Detect is the time from the fault action (w.Start) to the end of the
// first pull naming the faulted source, sent at or after the action, that
// returned 200 within the faulted_median bound: the decoder noticed the
// fault and prefilled locally. ok is false when no pull did. "First" is the
// earliest to end; a pull sent at the instant of the action counts, as it
// does in the fault window's checks, and one that took exactly the bound
// counts, as the median check's bound is inclusive. Pulls cut short by an
// early end never answered and do not count.
func Detect(samples []event.Sample, w event.Window, b event.Bounds) (d time.Duration, ok bool) {
	for _, s := range samples {
		if s.Aborted || s.Source != w.Source || s.Start < w.Start || s.Status != 200 || s.Latency > b.FaultedMedian {
			continue
		}
		if e := s.End() - w.Start; !ok || e < d {
			d, ok = e, true
		}
	}
	return d, ok
}

// Recover is the time from the end of the fault window (w.End: SIGCONT, or
// the restarted source ready) to the end of the first pull naming the
// faulted source that hit again, i.e. ended at or after w.End with cached
// tokens. A pull that hung through the window and hit once the source came
// back counts: it is the first evidence the source serves again. ok is false
// for a window that does not recover (remove) or when no pull hit again.
func Recover(samples []event.Sample, w event.Window) (d time.Duration, ok bool) {
	if !w.Recovers {
		return 0, false
	}
	for _, s := range samples {
		if s.Aborted || s.Source != w.Source || !s.Hit() || s.End() < w.End {
			continue
		}
		if e := s.End() - w.End; !ok || e < d {
			d, ok = e, true
		}
	}
	return d, ok
}

// FormatSeconds shows a time of event.Times as "12.34s", or "–" when it is nil.
func FormatSeconds(s *float64) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%.2fs", *s)
}
