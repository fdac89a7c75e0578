package check

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/event"
)

// RunFacts are a finished (or crashed) run's facts, as its events give
// them.
type RunFacts struct {
	Setup
	Windows       []event.Window // closed, or open with End 0
	Samples       []event.Sample // every pull that ended (or was cut short)
	Pending       []event.PullStart
	Verifications []event.Verification // the fault actions verified
	// Now is when Pending's ages are read (the stream's last timestamp);
	// RunEnd when the probe stopped sending.
	Now, RunEnd time.Duration
}

// JudgeRun judges a finished (or crashed) run from its facts, as the
// experiment judged it live (Judge.Verdict, final): its windows, every
// pull that ended, the pulls still in flight at f.Now, and the fault
// actions verified.
func JudgeRun(f RunFacts) (event.Verdict, bool) {
	j := NewJudge(f.Setup)
	runEnd := f.RunEnd
	ws := slices.Clone(f.Windows)
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
	for _, v := range f.Verifications {
		j.Verified(v)
	}
	for _, p := range f.Pending {
		if inWindow(p.Start, 0, runEnd) {
			j.Started(p)
		}
	}
	// Every pull that ended waits in start order as if it had just ended,
	// and is judged up to the first one still in flight (the rest count
	// as the live judge counts them, in the verdict).
	for _, s := range f.Samples {
		j.content.Add(s)
		j.noteBaseline(s)
		if inWindow(s.Start, 0, runEnd) { // one sent after the run's end is not judged (the oracle's rule too)
			j.buf = append(j.buf, s)
		}
	}
	slices.SortFunc(j.buf, cmpStart)
	j.Advance(runEnd + Lag)
	return j.Verdict(f.Now, runEnd, true)
}
