package check

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/event"
)

// JudgeRun judges a finished (or crashed) run from its facts, as the
// experiment judged it live: its windows (closed, or open with End 0),
// every pull that ended, the pulls still in flight at now, and the fault
// actions verified.
func JudgeRun(b event.Bounds, sources int, scripted bool, windows []event.Window, samples []event.Sample,
	pending []event.PullStart, verifs []event.Verification, now, runEnd time.Duration) (event.Verdict, bool) {
	j := NewJudge(b, sources, scripted)
	ws := slices.Clone(windows)
	slices.SortStableFunc(ws, func(a, b event.Window) int { return cmp.Compare(a.Start, b.Start) })
	for _, w := range ws {
		end := w.End
		w.End = 0
		j.Open(w)
		if end != 0 {
			w.End = end
			j.Close(w)
		}
	}
	// spanEnd of a window is the first window opened at or after its end.
	for _, wj := range j.wins {
		for _, o := range j.wins {
			if wj.w.End != 0 && o.w.Start >= wj.w.End && (wj.spanEnd == 0 || o.w.Start < wj.spanEnd) {
				wj.spanEnd = o.w.Start
			}
		}
	}
	for _, v := range verifs {
		j.Verified(v)
	}
	for _, p := range pending {
		if inWindow(p.Start, 0, runEnd) {
			j.Started(p)
		}
	}
	// Every pull that ended waits in start order as if it had just ended,
	// and is judged up to the first one still in flight (the rest count
	// as the live judge counts them, in the verdict).
	for _, s := range samples {
		if inWindow(s.Start, 0, runEnd) { // one sent after the run's end is not judged (the oracle's rule too)
			j.buf = append(j.buf, s)
		}
	}
	slices.SortFunc(j.buf, cmpStart)
	j.Advance(runEnd + Lag)
	return j.Verdict(now, runEnd, true)
}
