package check

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/event"
)

// Judged is the window a run is judged on, the one rule the experiment
// and the reports share: with a scripted timeline, the first scripted
// fault's window; without (faults fired from keys), the latest fault's.
// ok is false when no fault opened a window.
func Judged(windows []event.Window, scripted bool) (w event.Window, ok bool) {
	if len(windows) == 0 {
		return event.Window{}, false
	}
	if scripted {
		return windows[0], true
	}
	return windows[len(windows)-1], true
}

// Verdict is the run's verdict at now (since t0) for a run that ended, or
// is judged so far, at runEnd; ok is false when no fault window opened
// (the verdict then holds only all_200, fault_took_effect when a fault
// without a window was verified, content_matches once a pull could be
// compared, and the steady state when final).
// With one window, or on the dashboard (no script: the latest window), the
// run is judged on that window as the tests' oracle (Evaluate and
// WithFaultChecks) judges it; with several scripted windows every check is judged in every window and holds when
// it held in each. The verdict carries every window's verdict (final) or
// those not settled yet (live; Settled gives the others once), and the
// per-kind summary. final adds each source's steady state.
func (j *Judge) Verdict(now, runEnd time.Duration, final bool) (event.Verdict, bool) {
	several := j.scripted && len(j.wins) > 1
	t := j.counted(now, runEnd, final, several)
	var v event.Verdict
	runAll := checkAll200(t.run.all, t.run.allCut, 0, runEnd)
	windows := make([]event.WindowVerdict, 0, len(j.wins))
	for _, wj := range j.wins {
		if wj.settled != nil {
			windows = append(windows, *wj.settled)
			continue
		}
		windows = append(windows, j.windowVerdict(wj, t.figsOf(wj), now, runEnd))
	}
	if final {
		v.Steady = t.steadySummaries()
		v.Ranks = j.rankSummaries(t.ranks)
	}
	if len(windows) == 0 {
		// Without a fault only all_200 means anything (and the faults
		// without a window of their own, and the texts).
		v.Checks = []event.Result{runAll}
		if len(j.verifs) > 0 {
			v.Checks = append(v.Checks, FaultTookEffect(j.verifs, 0))
		}
		v.Passed = passed(v.Checks)
		return withContent(v, j.content), false
	}
	v.NotJudged = notJudged(windows)
	if several {
		v.Checks = append([]event.Result{runAll}, aggregate(judgedOnly(windows))...)
		r := t.run
		v.Summary = event.Summary{Faulted: r.faulted.set.stats(), Healthy: r.healthy.set.stats()}
		if slices.ContainsFunc(windows, func(w event.WindowVerdict) bool { return w.Recovers }) {
			v.Summary.Recovery = r.recovery.set.stats()
		}
		tm := worstTimes(windows)
		v.Times = &tm
	} else {
		judged, _ := Judged(j.windowList(), j.scripted)
		var jv event.WindowVerdict
		for _, w := range windows {
			if w.Source == judged.Source && w.Start == judged.Start {
				jv = w
			}
		}
		v.Checks = []event.Result{runAll}
		if jv.NotJudged == "" {
			v.Checks = append(v.Checks, windowOnly(jv.Checks)...)
		}
		v.Summary = jv.Summary
		tm := jv.Times
		v.Times = &tm
	}
	if j.content.rule.On {
		v.Checks = append(v.Checks, j.content.Result())
	}
	if len(j.verifs) > 0 {
		v.Checks = append(v.Checks, FaultTookEffect(j.verifs, 0))
	}
	v.Passed = passed(v.Checks) && len(v.NotJudged) == 0
	v.Kinds = Kinds(windows)
	for _, w := range windows {
		if final || !w.Settled {
			v.Windows = append(v.Windows, w)
		}
	}
	return v, true
}

// passed reports whether every check of cs passed.
func passed(cs []event.Result) bool {
	for _, c := range cs {
		if !c.Passed {
			return false
		}
	}
	return true
}

// windowOnly drops a window's own all_200 and fault_took_effect: the
// run's verdict judges both over the whole run.
func windowOnly(cs []event.Result) []event.Result {
	var out []event.Result
	for _, c := range cs {
		if c.Name != NameAll200 && c.Name != NameFaultTookEffect {
			out = append(out, c)
		}
	}
	return out
}

func (j *Judge) windowList() []event.Window {
	out := make([]event.Window, len(j.wins))
	for i, wj := range j.wins {
		out[i] = wj.w
	}
	return out
}

// countedTally holds what a verdict counts besides the judge's running
// figures: the pulls that ended and wait in the buffer, and the pulls in
// flight, placed into copies of the figures they change (made on first
// use), so the judge's own stay as they are.
type countedTally struct {
	j      *Judge
	run    *figs
	wins   map[*winJudge]*winFigs
	steady map[int]*Figures     // nil: the steady state is not counted
	ranks  map[rankKey]*Figures // nil: the rank breakdown is not counted
}

func (t *countedTally) rankFigs(k rankKey) *Figures {
	if t.ranks == nil {
		return nil
	}
	return figsAt(t.ranks, k, t.j.byRank)
}

func (t *countedTally) runFigs() *figs { return t.run }

func (t *countedTally) windowFigs(wj *winJudge) *winFigs {
	f := t.wins[wj]
	if f == nil {
		f = wj.f.clone()
		t.wins[wj] = f
	}
	return f
}

// figsOf is wj's figures as the verdict counts them: its copy, or its own
// when nothing was added.
func (t *countedTally) figsOf(wj *winJudge) *winFigs {
	if f := t.wins[wj]; f != nil {
		return f
	}
	return &wj.f
}

func (t *countedTally) steadyFigs(src int) *Figures {
	if t.steady == nil {
		return nil
	}
	f := t.steady[src]
	if f == nil {
		f = NewFigures()
		if o := t.j.steady[src]; o != nil {
			f = o.clone()
		}
		t.steady[src] = f
	}
	return f
}

// steadySummaries is each source's steady state, the pulls counted added.
func (t *countedTally) steadySummaries() []event.SourceSummary {
	out := make([]event.SourceSummary, 0, len(t.j.steady)+len(t.steady))
	for src, f := range t.j.steady {
		if c := t.steady[src]; c != nil {
			f = c
		}
		out = append(out, f.Summary(src))
	}
	for src, f := range t.steady {
		if t.j.steady[src] == nil {
			out = append(out, f.Summary(src))
		}
	}
	slices.SortFunc(out, func(a, b event.SourceSummary) int { return cmp.Compare(a.Source, b.Source) })
	return out
}

// counted places the pulls a verdict at now (the run judged to runEnd)
// counts as they are: those that ended and wait in the buffer and those
// in flight, each sent before runEnd (the oracle's rule), in start order
// (detect_s and recover_s are one pass in it). final counts them into the
// steady state too; several, into the run's faulted, healthy and recovery
// pulls (only a run of several scripted windows summarises those: the
// others keep all_200's figures only and skip the copy).
func (j *Judge) counted(now, runEnd time.Duration, final, several bool) *countedTally {
	t := &countedTally{j: j, wins: map[*winJudge]*winFigs{}}
	if several {
		c := j.run.clone()
		t.run = &c
	} else {
		t.run = &figs{all: j.run.all, allCut: slices.Clone(j.run.allCut)}
	}
	if final {
		t.steady = map[int]*Figures{}
		t.ranks = map[rankKey]*Figures{}
	}
	var pulls []event.Sample
	for _, s := range j.buf {
		if s.Start < runEnd {
			pulls = append(pulls, s)
		}
	}
	for _, p := range j.inflight {
		if p.Start < runEnd {
			// In flight, aged at now, as a sample cut short carries it.
			pulls = append(pulls, event.Sample{Source: p.Source, Rank: p.Rank, Trial: p.Trial, Start: p.Start, Latency: now - p.Start, Aborted: true})
		}
	}
	slices.SortFunc(pulls, cmpStart)
	for _, s := range pulls {
		j.place(s, t)
	}
	return t
}

// windowVerdict judges one window at now, the run judged to runEnd, on
// its figures f.
func (j *Judge) windowVerdict(wj *winJudge, f *winFigs, now, runEnd time.Duration) event.WindowVerdict {
	b := j.b
	w := wj.w
	if w.End == 0 {
		w.End = max(runEnd, w.Start) // judged as if it closed now, as the oracle's caller does
	}
	detectFrom := w.Start + b.DetectAfter
	recEnd := max(j.recoveryEnd(w, wj.spanEnd, runEnd), w.End)
	spanEnd := recEnd
	if !w.Recovers {
		spanEnd = w.End
	}
	checks := []event.Result{
		checkAll200(f.all, f.allCut, w.Start, spanEnd),
		checkFaultedMax(&f.faulted.set, f.faulted.cut, w, b),
		checkFaultedMedian(&f.after.set, f.after.cut, detectFrom, w, b),
		checkHealthy(&f.healthy.set, f.healthy.cut, w, b),
	}
	if w.Recovers {
		checks = append(checks, checkRecovery(&f.recovery.set, f.recovery.cut, w.End, recEnd, b))
	}
	if len(wj.verifs) > 0 {
		checks = append(checks, FaultTookEffect(wj.verifs, 0))
	}
	v := event.WindowVerdict{Index: wj.index, Kind: w.Kind, Source: w.Source, Start: w.Start, End: wj.w.End,
		Recovers: w.Recovers, Passed: passed(checks), Checks: checks, NotJudged: wj.base.notJudged(w.Source, w.Start)}
	if v.NotJudged == "" {
		v.NotJudged, v.Checks = laggedChecks(checks, map[string]SelfLag{NameFaultedBound: f.faulted.lag,
			NameFaultedMedian: f.after.lag, NameHealthy: f.healthy.lag, NameRecovery: f.recovery.lag})
	}
	if v.NotJudged != "" {
		v.Passed = false
	}
	if d, ok := f.det.result(w.Start); ok {
		v.Times.DetectS = seconds(d)
	}
	if w.Recovers {
		if at, ok := f.rec.result(); ok {
			v.Times.RecoverS = seconds(at - w.End)
		}
	}
	v.Summary = event.Summary{Faulted: f.faulted.set.stats(), Healthy: f.healthy.set.stats(), AfterDetect: f.after.set.stats()}
	if w.Recovers {
		v.Summary.Recovery = f.recovery.set.stats()
	}
	return v
}
