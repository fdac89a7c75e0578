package check

import (
	"slices"
	"time"

	"p2pfault/event"
)

// category is what a pull is to the window that judges it.
type category int

const (
	catNone     category = iota // no window's: steady state
	catFaulted                  // names the window's source, started in it
	catHealthy                  // names another source, started in it
	catRecovery                 // names its source, started in its recovery window
	catAfter                    // names another source, started in its recovery window
)

// inFault reports whether a pull started at t is in fault window w, the
// half-open [w.Start, w.End) (inWindow); a window still open (End 0) runs
// on. It is the one rule of which fault window a pull started in.
func inFault(w event.Window, t time.Duration) bool {
	return w.End == 0 && t >= w.Start || inWindow(t, w.Start, w.End)
}

// inAnyFault reports whether a pull started at t is in some fault window:
// one that is not is part of its source's steady state.
func (j *Judge) inAnyFault(t time.Duration) bool {
	return slices.ContainsFunc(j.wins, func(wj *winJudge) bool { return inFault(wj.w, t) })
}

// inOwnRecovery reports whether a pull naming src started at t is in the
// recovery window of a closed window on src: the fault's aftermath, which
// that window's recovery check judges, not its source's steady state (a
// stalled source's pulls that hang after the resume are not steady).
func (j *Judge) inOwnRecovery(src int, t time.Duration) bool {
	return slices.ContainsFunc(j.wins, func(wj *winJudge) bool {
		w := wj.w
		return w.Source == src && w.End != 0 && w.Recovers && inWindow(t, w.End, j.recoveryEnd(w, wj.spanEnd, -1))
	})
}

// assign is the window that judges a pull naming src started at start,
// and what the pull is to it: its own source's window first (a faulted
// pull, or one in that window's recovery window), else the first window
// in force then (a healthy pull), else the first whose recovery window
// holds it. Windows one after another (a nemesis' default) never share a
// pull; the order only matters for faults in force at once.
func (j *Judge) assign(src int, start time.Duration) (*winJudge, category) {
	inRecovery := func(wj *winJudge) bool {
		w := wj.w
		return w.End != 0 && w.Recovers && inWindow(start, w.End, j.recoveryEnd(w, wj.spanEnd, -1))
	}
	for _, wj := range j.wins {
		if wj.w.Source == src && inFault(wj.w, start) {
			return wj, catFaulted
		}
	}
	for _, wj := range j.wins {
		if wj.w.Source == src && inRecovery(wj) {
			return wj, catRecovery
		}
	}
	for _, wj := range j.wins {
		if inFault(wj.w, start) {
			return wj, catHealthy
		}
	}
	for _, wj := range j.wins {
		if inRecovery(wj) {
			return wj, catAfter
		}
	}
	return nil, catNone
}

// recoveryEnd is where the recovery window of w (closed) ends: the
// recovery bound's length after it, cut at the next window's start
// (spanEnd, 0: none yet) and at runEnd (-1: not yet known).
func (j *Judge) recoveryEnd(w event.Window, spanEnd, runEnd time.Duration) time.Duration {
	end := w.End + j.b.RecoveryWindow
	if spanEnd != 0 {
		end = min(end, spanEnd)
	}
	if runEnd >= 0 {
		end = min(end, runEnd)
	}
	return end
}

// recoverer is the window whose recover_s a pull naming src started at
// start counts for: the latest closed window on src before it, until the
// next window's start.
func (j *Judge) recoverer(src int, start time.Duration) *winJudge {
	for i := len(j.wins) - 1; i >= 0; i-- {
		wj := j.wins[i]
		if wj.w.Source != src || wj.w.End == 0 || start < wj.w.End {
			continue
		}
		if !wj.w.Recovers || wj.spanEnd != 0 && start >= wj.spanEnd {
			return nil
		}
		return wj
	}
	return nil
}

// tally is where place puts a pull: the judge's own running figures
// (liveTally, a pull judged for good) or a verdict's copy of them
// (countedTally, the pulls a verdict counts as they are).
type tally interface {
	runFigs() *figs
	windowFigs(wj *winJudge) *winFigs
	// steadyFigs is src's steady state; nil: not counted.
	steadyFigs(src int) *Figures
	// rankFigs is one row of a ranked source's breakdown; nil: not counted.
	rankFigs(k rankKey) *Figures
}

// place is the one sequence that judges a pull s (ended, or in flight:
// Aborted, aged by its Latency) into t: its source's steady state when it
// started outside every window and its own source's recovery windows, the run's figures, those of the window
// assign gives (not settled), and the recover_s of the window recoverer
// gives.
func (j *Judge) place(s event.Sample, t tally) {
	if f := t.steadyFigs(s.Source); f != nil && !j.inAnyFault(s.Start) && !j.inOwnRecovery(s.Source, s.Start) {
		f.Add(s)
	}
	wj, c := j.assign(s.Source, s.Start)
	j.placeRank(s, c, t)
	if wj == nil || wj.settled != nil {
		wj, c = nil, catNone
	}
	t.runFigs().add(c, s, false)
	if wj != nil {
		wf := t.windowFigs(wj)
		wf.add(c, s, c == catFaulted && s.Start >= wj.w.Start+j.b.DetectAfter)
		if c == catFaulted {
			wf.det.feed(timedOf(s), j.b.FaultedMedian)
		}
	}
	if s.Aborted {
		return // no answer yet: neither a hit nor a miss for recover_s
	}
	if rw := j.recoverer(s.Source, s.Start); rw != nil && rw.settled == nil {
		t.windowFigs(rw).rec.add(s.Start, s.Hit())
	}
}

// liveTally places into the judge's own figures.
type liveTally struct{ j *Judge }

func (t liveTally) runFigs() *figs                   { return &t.j.run }
func (t liveTally) windowFigs(wj *winJudge) *winFigs { return &wj.f }
func (t liveTally) rankFigs(k rankKey) *Figures      { return figsAt(t.j.byRank, k, nil) }
func (t liveTally) steadyFigs(src int) *Figures {
	f := t.j.steady[src]
	if f == nil {
		f = NewFigures()
		t.j.steady[src] = f
	}
	return f
}

// bucket is the pulls of one category: those that ended, and those in
// flight by their age.
type bucket struct {
	set pullSet
	cut []inflight
	// shared says set and cut are another bucket's (a verdict's copy,
	// clone): they are copied before the first pull is added, so a
	// verdict copies only what it changes.
	shared bool
	lag    SelfLag // its pulls p2pfault sent late (lag.go)
}

func (b *bucket) add(s event.Sample) {
	if b.shared {
		b.set, b.cut, b.shared = b.set.clone(), slices.Clone(b.cut), false
	}
	b.lag.add(s)
	if s.Aborted {
		b.cut = append(b.cut, cutOf(s))
		return
	}
	b.set.add(s)
}

// clone is a copy of b that leaves b as it is, whatever is added to it.
func (b *bucket) clone() bucket { return bucket{set: b.set, cut: b.cut, shared: true, lag: b.lag} }

// figs are a window's (or the run's) pulls by category, as its checks
// read them: every pull (all_200's), and those of each category.
type figs struct {
	all                               allSet
	allCut                            []inflight
	faulted, after, healthy, recovery bucket
}

// of is the one dispatch by category: the bucket a pull of category c
// goes in besides all (nil: none).
func (f *figs) of(c category) *bucket {
	switch c {
	case catFaulted:
		return &f.faulted
	case catHealthy:
		return &f.healthy
	case catRecovery:
		return &f.recovery
	}
	return nil
}

// add counts a pull of category c; after says it is a faulted pull
// started once detection may have happened (faulted_median's).
func (f *figs) add(c category, s event.Sample, after bool) {
	if s.Aborted {
		f.allCut = append(f.allCut, cutOf(s))
	} else {
		f.all.add(s)
	}
	if b := f.of(c); b != nil {
		b.add(s)
	}
	if after {
		f.after.add(s)
	}
}

func (f *figs) clone() figs {
	return figs{all: f.all, allCut: slices.Clone(f.allCut), faulted: f.faulted.clone(), after: f.after.clone(),
		healthy: f.healthy.clone(), recovery: f.recovery.clone()}
}

// winFigs are a window's figures and its detect_s and recover_s so far.
type winFigs struct {
	figs
	det detectAcc
	rec recoverAcc
}

func (f *winFigs) clone() *winFigs {
	return &winFigs{figs: f.figs.clone(), det: f.det, rec: f.rec.clone()}
}

// cutOf is a pull in flight as a sample carries it (Aborted, aged by its
// Latency).
func cutOf(s event.Sample) inflight {
	return inflight{Source: s.Source, Start: s.Start, Age: max(s.Latency, 0)}
}

// timedOf is s as detect_s reads it.
func timedOf(s event.Sample) timedPull {
	if s.Aborted {
		return timedPull{start: s.Start, age: max(s.Latency, 0), pending: true, trial: s.Trial}
	}
	return timedPull{start: s.Start, latency: s.Latency, status: s.Status, hit: s.Hit(), trial: s.Trial}
}
