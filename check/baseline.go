package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
)

// A fault window is judged only if its source was working when the fault
// fired: a source whose baseline (its pulls that ended before its fault
// fired) had stopped hitting would fail every bound whatever the fault
// did, so the window is invalid, not failed: its verdict carries why
// (WindowVerdict.NotJudged), its checks are not the run's, and a run with
// nothing failed but a window not judged exits 3 (Outcome).

// BaselinePulls is how many of a source's latest pulls before its fault
// fired are read: the window is invalid when there was at least one and
// none of them hit. The warm-up proved every source hitting at t0, so
// fewer (a fault fired early) are read as they are.
const BaselinePulls = 3

// basePull is one pull of a baseline: when it ended, and whether it hit.
type basePull struct {
	end time.Duration
	hit bool
}

// baseline is the latest BaselinePulls pulls naming one source, by end.
type baseline []basePull

func (b *baseline) add(s event.Sample) {
	p := basePull{end: s.End(), hit: s.Hit() && s.Err == ""}
	i, _ := slices.BinarySearchFunc(*b, p, func(a, b basePull) int { return cmp.Compare(a.end, b.end) })
	*b = slices.Insert(*b, i, p)
	if len(*b) > BaselinePulls {
		*b = (*b)[len(*b)-BaselinePulls:]
	}
}

// before is the part of b that ended before t.
func (b baseline) before(t time.Duration) baseline {
	return slices.DeleteFunc(slices.Clone(b), func(p basePull) bool { return p.end >= t })
}

// notJudged is why a window on src starting at start cannot be judged on
// baseline b (its pulls that ended before start), or "".
func (b baseline) notJudged(src int, start time.Duration) string {
	if len(b) == 0 || slices.ContainsFunc(b, func(p basePull) bool { return p.hit }) {
		return ""
	}
	return fmt.Sprintf("%s's baseline had stopped hitting before its fault fired: its last %d pulls that ended before %s missed (the last at %s)",
		event.SourceName(src), len(b), secs1(start), secs1(b[len(b)-1].end))
}

// noteBaseline takes a pull that ended into its source's latest pulls and
// the baseline of every window on its source that opened after it ended.
// A pull sent while an earlier fault on its source was in force, or in
// that fault's recovery window, is no baseline: its miss is the earlier
// fault's doing, not a sign that P2P never engaged (a kill 100 ms after a
// stall ended, at --time-scale 0.25, found the reconnect's misses and was
// not judged).
func (j *Judge) noteBaseline(s event.Sample) {
	if s.Aborted {
		return // cut short by the run's end: no outcome
	}
	if j.afterAFault(s) {
		return
	}
	b := j.recent[s.Source]
	b.add(s)
	j.recent[s.Source] = b
	for _, wj := range j.wins {
		if wj.settled == nil && wj.w.Source == s.Source && s.End() < wj.w.Start {
			wj.base.add(s)
		}
	}
}

// afterAFault says whether s was sent in a fault window on its source or
// in the recovery window after it.
func (j *Judge) afterAFault(s event.Sample) bool {
	return slices.ContainsFunc(j.wins, func(wj *winJudge) bool {
		w := wj.w
		return w.Source == s.Source && s.Start >= w.Start && (w.End == 0 || s.Start < w.End+j.b.RecoveryWindow)
	})
}

// Outcome is the exit a finished run's verdicts give: nil when every one
// passed, exitcode.ErrBoundFailed when a check failed in any (a failed
// bound comes first), else exitcode.ErrNotJudged (a window not judged).
func Outcome(vs ...event.Verdict) error {
	var notJudged bool
	for _, v := range vs {
		if v.Failed() {
			return exitcode.ErrBoundFailed
		}
		notJudged = notJudged || len(v.NotJudged) > 0
	}
	if notJudged {
		return exitcode.ErrNotJudged
	}
	return nil
}
