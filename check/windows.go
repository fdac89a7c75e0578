package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// Judge judges a run as it goes, every fault window on its own, from
// running figures: it keeps O(1) per source and per window, not per pull
// (latencies, see pullSet), so a run of hours keeps what a run of a minute
// does. The experiment feeds it the run's facts as they come (Open, Close,
// Started, Ended, Verified; Advance now and then) and asks it for the
// verdict; `p2pfault report` feeds it a finished run's events (JudgeRun).
// For a run of one window it gives exactly Evaluate's and
// WithFaultChecks' verdict.
//
// Which pulls a window judges: a pull is judged by when it started, so one
// that overlaps two windows is judged in the first. A pull naming a
// source, started in a fault window of that source, is the window's
// faulted pull, and one started in its recovery window (the recovery
// bound's length after it closed, cut short by the next window's start) a
// recovery pull; a pull naming another source started in a window is its
// healthy pull (in the first window in force, when faults overlap). detect_s reads a
// window's faulted pulls; recover_s the pulls naming its source from its
// end to the next window's start (or the run's end). A pull outside every
// window is part of its source's steady state (Steady's).
//
// Pulls are judged in start order, once every pull started before them
// has ended (detect_s and recover_s are one pass in start order) and
// Lag after their start (by then every window that opened before them is
// known to the judge); until then they wait in a buffer, bounded by the
// rate and the pull timeout, and a verdict counts them as they are.
// Not safe for concurrent use.
type Judge struct {
	b        event.Bounds
	sources  int
	scripted bool

	inflight map[int64]event.PullStart
	buf      []event.Sample // ended, not judged yet, in start order

	all    allSet // every pull judged: the run's all_200
	cut    []inflight
	steady map[int]*Figures
	// run's faulted, healthy and recovery pulls over every window: a run
	// of several windows summarises them.
	runFaulted, runHealthy, runRecovery pullSet

	wins       []*winJudge // in start order
	verifs     []event.Verification
	newSettled []event.WindowVerdict
	// stop is when the run stopped sending (Stop; 0: not yet): a pull
	// sent at or after it is not judged, as Evaluate judges none sent
	// after the run's end.
	stop time.Duration
}

// Lag is how long after its start a pull waits before it is judged: a
// fault window is known to the judge within milliseconds of its start.
const Lag = 500 * time.Millisecond

// NewJudge returns a judge of a run of sources sources with bounds b
// (scaled); scripted says the run plays a timeline (check.Judged).
func NewJudge(b event.Bounds, sources int, scripted bool) *Judge {
	j := &Judge{b: b, sources: sources, scripted: scripted,
		inflight: map[int64]event.PullStart{}, steady: map[int]*Figures{}}
	for i := range sources {
		j.steady[i] = NewFigures()
	}
	return j
}

// winJudge is one window's running figures; once settled only its verdict.
type winJudge struct {
	w     event.Window
	index int
	// spanEnd is the start of the first window that opened at or after
	// this one closed: its recovery and recover_s end there (0: none yet).
	spanEnd time.Duration

	all                               allSet
	faulted, after, healthy, recovery pullSet
	allCut, faultedCut, afterCut      []inflight
	healthyCut, recoveryCut           []inflight
	det                               detectAcc
	rec                               recoverAcc
	verifs                            []event.Verification
	settled                           *event.WindowVerdict
}

// Open tells the judge a fault window opened (w.End 0).
func (j *Judge) Open(w event.Window) {
	for _, o := range j.wins {
		if o.w.End != 0 && o.spanEnd == 0 && w.Start >= o.w.End {
			o.spanEnd = w.Start
		}
	}
	wj := &winJudge{w: w, index: len(j.wins) + 1, rec: recoverAcc{rate: j.b.RecoveryHitRate}}
	j.wins = append(j.wins, wj)
}

// Close tells the judge the open window on w.Source that started at
// w.Start closed at w.End.
func (j *Judge) Close(w event.Window) {
	for _, o := range j.wins {
		if o.w.Source == w.Source && o.w.Start == w.Start && o.w.End == 0 {
			o.w = w
			return
		}
	}
	// A close without its open (a stream cut at its start): both at once.
	j.Open(w)
}

// Stop tells the judge the run's judged time ended at runEnd: pulls sent
// from then on (while the probe stops) are not judged.
func (j *Judge) Stop(runEnd time.Duration) {
	j.stop = runEnd
	for t, p := range j.inflight {
		if p.Start >= runEnd {
			delete(j.inflight, t)
		}
	}
	j.buf = slices.DeleteFunc(j.buf, func(s event.Sample) bool { return s.Start >= runEnd })
}

func (j *Judge) stopped(start time.Duration) bool { return j.stop > 0 && start >= j.stop }

// Started tells the judge a pull was sent.
func (j *Judge) Started(p event.PullStart) {
	if !j.stopped(p.Start) {
		j.inflight[p.Trial] = p
	}
}

// Ended tells the judge a pull ended (or was cut short: Aborted).
func (j *Judge) Ended(s event.Sample) {
	delete(j.inflight, s.Trial)
	if j.stopped(s.Start) {
		return
	}
	i, _ := slices.BinarySearchFunc(j.buf, s, cmpStart)
	j.buf = slices.Insert(j.buf, i, s)
}

// Verified tells the judge what a fault action's verification saw: it
// belongs to the window on its source nearest to the action (one that
// spans it; else the nearest by start or end): an action's window opens
// when the action has taken hold, which under load can be seconds after
// the action began (v.At), and an undo (heal, resume) acts at its
// window's end.
func (j *Judge) Verified(v event.Verification) {
	j.verifs = append(j.verifs, v)
	var best *winJudge
	var bestD time.Duration
	for _, o := range j.wins {
		if o.w.Source != v.Source {
			continue
		}
		var d time.Duration
		switch {
		case v.At < o.w.Start:
			d = o.w.Start - v.At
		case o.w.End != 0 && v.At > o.w.End:
			d = v.At - o.w.End
		}
		if best == nil || d <= bestD {
			best, bestD = o, d
		}
	}
	if best != nil {
		best.verifs = append(best.verifs, v)
	}
}

// Advance judges the pulls that ended, started before now-Lag and before
// every pull still in flight, and settles the windows nothing to come can
// change any more (Settled returns them).
func (j *Judge) Advance(now time.Duration) {
	var oldest *event.PullStart
	for _, p := range j.inflight {
		if oldest == nil || p.Start < oldest.Start || p.Start == oldest.Start && p.Trial < oldest.Trial {
			oldest = &p
		}
	}
	n := 0
	for _, s := range j.buf {
		if s.Start >= now-Lag || oldest != nil && cmpStart(s, event.Sample{Start: oldest.Start, Trial: oldest.Trial}) > 0 {
			break
		}
		j.feed(s)
		n++
	}
	j.buf = slices.Delete(j.buf, 0, n)
	j.settle(now, oldest)
}

// settle turns every window whose span has ended, with no pull of it
// still to come, into its verdict and drops its figures.
func (j *Judge) settle(now time.Duration, oldest *event.PullStart) {
	for _, wj := range j.wins {
		if wj.settled != nil || wj.w.End == 0 || wj.spanEnd == 0 {
			continue
		}
		if oldest != nil && oldest.Start < wj.spanEnd || len(j.buf) > 0 && j.buf[0].Start < wj.spanEnd {
			continue
		}
		v := j.windowVerdict(wj, nil, now, max(now, wj.spanEnd))
		v.Settled = true
		wj.settled = &v
		*wj = winJudge{w: wj.w, index: wj.index, spanEnd: wj.spanEnd, settled: &v}
		j.newSettled = append(j.newSettled, v)
	}
}

// Settled returns the windows settled since the last call.
func (j *Judge) Settled() []event.WindowVerdict {
	out := j.newSettled
	j.newSettled = nil
	return out
}

// Pending are the pulls in flight now.
func (j *Judge) Pending() []event.PullStart {
	out := make([]event.PullStart, 0, len(j.inflight))
	for _, p := range j.inflight {
		out = append(out, p)
	}
	return out
}

// Crossed reports whether a pull in flight broke a time bound of a window
// not yet settled in (from, to] (the package's Crossed).
func (j *Judge) Crossed(from, to time.Duration) bool {
	if len(j.inflight) == 0 {
		return false
	}
	pending := j.Pending()
	for _, wj := range j.wins {
		if wj.settled == nil && Crossed(pending, wj.w, j.b, from, to) {
			return true
		}
	}
	return false
}

// category is what a pull is to the window that judges it.
type category int

const (
	catNone     category = iota // no window's: steady state
	catFaulted                  // names the window's source, started in it
	catHealthy                  // names another source, started in it
	catRecovery                 // names its source, started in its recovery window
	catAfter                    // names another source, started in its recovery window
)

// assign is the window that judges a pull naming src started at start,
// and what the pull is to it: its own source's window first (a faulted
// pull, or one in that window's recovery window), else the first window
// in force then (a healthy pull), else the first whose recovery window
// holds it. Windows one after another (a nemesis' default) never share a
// pull; the order only matters for faults in force at once.
func (j *Judge) assign(src int, start time.Duration) (*winJudge, category) {
	inFault := func(w event.Window) bool { return start >= w.Start && (w.End == 0 || start < w.End) }
	inRecovery := func(wj *winJudge) bool {
		w := wj.w
		return w.End != 0 && w.Recovers && start >= w.End && start < j.recoveryEnd(w, wj.spanEnd, -1)
	}
	for _, wj := range j.wins {
		if wj.w.Source == src && inFault(wj.w) {
			return wj, catFaulted
		}
	}
	for _, wj := range j.wins {
		if wj.w.Source == src && inRecovery(wj) {
			return wj, catRecovery
		}
	}
	for _, wj := range j.wins {
		if inFault(wj.w) {
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

// feed judges one pull that ended, in start order.
func (j *Judge) feed(s event.Sample) {
	outside := true
	for _, wj := range j.wins {
		end := wj.w.End
		if s.Start >= wj.w.Start && (end == 0 || s.Start < end) {
			outside = false
			break
		}
	}
	if outside {
		j.figures(s.Source).Add(s)
	}
	if s.Aborted {
		p := inflight{Source: s.Source, Start: s.Start, Age: max(s.Latency, 0)}
		j.cut = append(j.cut, p)
		if wj, c := j.assign(s.Source, s.Start); wj != nil && wj.settled == nil {
			wj.addCut(c, p, j.b)
			if c == catFaulted {
				wj.det.feed(timedPull{start: s.Start, age: p.Age, pending: true, trial: s.Trial}, j.b.FaultedMedian)
			}
		}
		return
	}
	j.all.add(s)
	if wj, c := j.assign(s.Source, s.Start); wj != nil && wj.settled == nil {
		wj.add(c, s, j.b)
		switch c {
		case catFaulted:
			j.runFaulted.add(s)
			wj.det.feed(timedPull{start: s.Start, latency: s.Latency, status: s.Status, hit: s.Hit(), trial: s.Trial}, j.b.FaultedMedian)
		case catHealthy:
			j.runHealthy.add(s)
		case catRecovery:
			j.runRecovery.add(s)
		}
	}
	if wj := j.recoverer(s.Source, s.Start); wj != nil && wj.settled == nil {
		wj.rec.add(s.Start, s.Hit())
	}
}

func (j *Judge) figures(src int) *Figures {
	f := j.steady[src]
	if f == nil {
		f = NewFigures()
		j.steady[src] = f
	}
	return f
}

func (wj *winJudge) add(c category, s event.Sample, b event.Bounds) {
	wj.all.add(s)
	switch c {
	case catFaulted:
		wj.faulted.add(s)
		if s.Start >= wj.w.Start+b.DetectAfter {
			wj.after.add(s)
		}
	case catHealthy:
		wj.healthy.add(s)
	case catRecovery:
		wj.recovery.add(s)
	}
}

func (wj *winJudge) addCut(c category, p inflight, b event.Bounds) {
	wj.allCut = append(wj.allCut, p)
	switch c {
	case catFaulted:
		wj.faultedCut = append(wj.faultedCut, p)
		if p.Start >= wj.w.Start+b.DetectAfter {
			wj.afterCut = append(wj.afterCut, p)
		}
	case catHealthy:
		wj.healthyCut = append(wj.healthyCut, p)
	case catRecovery:
		wj.recoveryCut = append(wj.recoveryCut, p)
	}
}

// extras are what a verdict counts besides a window's running figures:
// the pulls that ended and wait in the buffer, and the pulls in flight.
type extras struct {
	all, faulted, after, healthy, recovery []event.Sample
	allP, faultedP, afterP, healthyP, recP []inflight
	detect                                 []timedPull // faulted pulls, ended and in flight, in start order
	recover                                []timedPull // ended pulls for recover_s, in start order
}

// Verdict is the run's verdict at now (since t0) for a run that ended, or
// is judged so far, at runEnd; ok is false when no fault window opened
// (the verdict then holds only all_200, and the steady state when final). With one window, or
// on the dashboard (no script: the latest window), the run is judged on
// that window as Evaluate and WithFaultChecks judge it; with several
// scripted windows every check is judged in every window and holds when
// it held in each. The verdict carries every window's verdict (final) or
// those not settled yet (live; Settled gives the others once), and the
// per-kind summary. final adds each source's steady state.
func (j *Judge) Verdict(now, runEnd time.Duration, final bool) (event.Verdict, bool) {
	ex := j.extras(now, runEnd)
	var v event.Verdict
	runAll := checkAll200(j.all.plus(ex[nil].all), append(slices.Clone(j.cut), ex[nil].allP...), 0, runEnd)
	var windows []event.WindowVerdict
	for _, wj := range j.wins {
		if wj.settled != nil {
			windows = append(windows, *wj.settled)
			continue
		}
		windows = append(windows, j.windowVerdict(wj, ex[wj], now, runEnd))
	}
	if final {
		v.Steady = j.steadyAt(now, runEnd)
	}
	if len(windows) == 0 {
		// Without a fault only all_200 means anything.
		v.Checks, v.Passed = []event.Result{runAll}, runAll.Passed
		return v, false
	}
	judged, _ := Judged(j.windowList(), j.scripted)
	var jv event.WindowVerdict
	for _, w := range windows {
		if w.Source == judged.Source && w.Start == judged.Start {
			jv = w
		}
	}
	if !j.scripted || len(windows) == 1 {
		v.Checks = append([]event.Result{runAll}, windowOnly(jv.Checks)...)
		v.Summary = jv.Summary
		t := jv.Times
		v.Times = &t
	} else {
		v.Checks = append([]event.Result{runAll}, aggregate(windows)...)
		f, h, r := j.runFaulted.plus(ex[nil].faulted), j.runHealthy.plus(ex[nil].healthy), j.runRecovery.plus(ex[nil].recovery)
		v.Summary = event.Summary{Faulted: f.stats(), Healthy: h.stats()}
		if slices.ContainsFunc(windows, func(w event.WindowVerdict) bool { return w.Recovers }) {
			v.Summary.Recovery = r.stats()
		}
		t := worstTimes(windows)
		v.Times = &t
	}
	if len(j.verifs) > 0 {
		v.Checks = append(v.Checks, FaultTookEffect(j.verifs, 0))
	}
	v.Passed = true
	for _, c := range v.Checks {
		v.Passed = v.Passed && c.Passed
	}
	v.Kinds = Kinds(windows)
	for _, w := range windows {
		if final || !w.Settled {
			v.Windows = append(v.Windows, w)
		}
	}
	return v, true
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

// extras sorts the buffered pulls and the pulls in flight at now into the
// windows that judge them; ex[nil] holds the run's own. A pull sent at or
// after runEnd is not judged (Evaluate's rule).
func (j *Judge) extras(now, runEnd time.Duration) map[*winJudge]*extras {
	ex := map[*winJudge]*extras{nil: {}}
	get := func(wj *winJudge) *extras {
		e := ex[wj]
		if e == nil {
			e = &extras{}
			ex[wj] = e
		}
		return e
	}
	pend := j.Pending()
	slices.SortFunc(pend, func(a, b event.PullStart) int {
		return cmpStart(event.Sample{Start: a.Start, Trial: a.Trial}, event.Sample{Start: b.Start, Trial: b.Trial})
	})
	run := ex[nil]
	for _, s := range j.buf {
		if s.Start >= runEnd {
			continue
		}
		var p *inflight
		if s.Aborted {
			p = &inflight{Source: s.Source, Start: s.Start, Age: max(s.Latency, 0)}
			run.allP = append(run.allP, *p)
		} else {
			run.all = append(run.all, s)
		}
		wj, c := j.assign(s.Source, s.Start)
		if wj != nil && wj.settled == nil {
			e := get(wj)
			if p != nil {
				e.addP(c, *p, wj, j.b)
				if c == catFaulted {
					e.detect = append(e.detect, timedPull{start: s.Start, age: p.Age, pending: true, trial: s.Trial})
				}
			} else {
				e.add(c, s, wj, j.b)
				switch c {
				case catFaulted:
					run.faulted = append(run.faulted, s)
					e.detect = append(e.detect, timedPull{start: s.Start, latency: s.Latency, status: s.Status, hit: s.Hit(), trial: s.Trial})
				case catHealthy:
					run.healthy = append(run.healthy, s)
				case catRecovery:
					run.recovery = append(run.recovery, s)
				}
			}
		}
		if p == nil {
			if rw := j.recoverer(s.Source, s.Start); rw != nil && rw.settled == nil {
				get(rw).recover = append(get(rw).recover, timedPull{start: s.Start, hit: s.Hit(), trial: s.Trial})
			}
		}
	}
	for _, p := range pend {
		if p.Start >= runEnd {
			continue
		}
		ip := inflight{Source: p.Source, Start: p.Start, Age: max(now-p.Start, 0)}
		run.allP = append(run.allP, ip)
		wj, c := j.assign(p.Source, p.Start)
		if wj == nil || wj.settled != nil {
			continue
		}
		e := get(wj)
		e.addP(c, ip, wj, j.b)
		if c == catFaulted {
			e.detect = append(e.detect, timedPull{start: p.Start, age: ip.Age, pending: true, trial: p.Trial})
		}
	}
	// Buffered pulls and pulls in flight interleave in start order.
	for _, e := range ex {
		slices.SortFunc(e.detect, func(a, b timedPull) int {
			if c := cmp.Compare(a.start, b.start); c != 0 {
				return c
			}
			return cmp.Compare(a.trial, b.trial)
		})
	}
	return ex
}

func (e *extras) add(c category, s event.Sample, wj *winJudge, b event.Bounds) {
	e.all = append(e.all, s)
	switch c {
	case catFaulted:
		e.faulted = append(e.faulted, s)
		if s.Start >= wj.w.Start+b.DetectAfter {
			e.after = append(e.after, s)
		}
	case catHealthy:
		e.healthy = append(e.healthy, s)
	case catRecovery:
		e.recovery = append(e.recovery, s)
	}
}

func (e *extras) addP(c category, p inflight, wj *winJudge, b event.Bounds) {
	e.allP = append(e.allP, p)
	switch c {
	case catFaulted:
		e.faultedP = append(e.faultedP, p)
		if p.Start >= wj.w.Start+b.DetectAfter {
			e.afterP = append(e.afterP, p)
		}
	case catHealthy:
		e.healthyP = append(e.healthyP, p)
	case catRecovery:
		e.recP = append(e.recP, p)
	}
}

// windowVerdict judges one window at now, the run judged to runEnd: its
// figures so far plus ex.
func (j *Judge) windowVerdict(wj *winJudge, ex *extras, now, runEnd time.Duration) event.WindowVerdict {
	if ex == nil {
		ex = &extras{}
	}
	b := j.b
	w := wj.w
	if w.End == 0 {
		w.End = max(runEnd, w.Start) // judged as if it closed now, as Evaluate's caller does
	}
	detectFrom := w.Start + b.DetectAfter
	recEnd := max(j.recoveryEnd(w, wj.spanEnd, runEnd), w.End)
	all := wj.all.plus(ex.all)
	faulted := wj.faulted.plus(ex.faulted)
	after := wj.after.plus(ex.after)
	healthy := wj.healthy.plus(ex.healthy)
	recovery := wj.recovery.plus(ex.recovery)
	cat := func(a, b []inflight) []inflight { return append(slices.Clone(a), b...) }
	spanEnd := recEnd
	if !w.Recovers {
		spanEnd = w.End
	}
	checks := []event.Result{
		checkAll200(all, cat(wj.allCut, ex.allP), w.Start, spanEnd),
		checkFaultedMax(&faulted, cat(wj.faultedCut, ex.faultedP), w, b),
		checkFaultedMedian(&after, cat(wj.afterCut, ex.afterP), detectFrom, w, b),
		checkHealthy(&healthy, cat(wj.healthyCut, ex.healthyP), w, b),
	}
	if w.Recovers {
		checks = append(checks, checkRecovery(&recovery, cat(wj.recoveryCut, ex.recP), w.End, recEnd, b))
	}
	if len(wj.verifs) > 0 {
		checks = append(checks, FaultTookEffect(wj.verifs, 0))
	}
	v := event.WindowVerdict{Index: wj.index, Kind: w.Kind, Source: w.Source, Start: w.Start, End: wj.w.End,
		Recovers: w.Recovers, Passed: true, Checks: checks}
	for _, c := range checks {
		v.Passed = v.Passed && c.Passed
	}
	det := wj.det
	for _, p := range ex.detect {
		det.feed(p, b.FaultedMedian)
	}
	if d, ok := det.result(w.Start); ok {
		v.Times.DetectS = seconds(d)
	}
	if w.Recovers {
		rec := wj.rec.clone()
		for _, p := range ex.recover {
			rec.add(p.start, p.hit)
		}
		if at, ok := rec.result(); ok {
			v.Times.RecoverS = seconds(at - w.End)
		}
	}
	v.Summary = event.Summary{Faulted: faulted.stats(), Healthy: healthy.stats()}
	if w.Recovers {
		v.Summary.Recovery = recovery.stats()
	}
	return v
}

// steadyAt is each source's steady state, its pulls in flight counted
// (those sent before runEnd).
func (j *Judge) steadyAt(now, runEnd time.Duration) []event.SourceSummary {
	figs := map[int]*Figures{}
	for src, f := range j.steady {
		c := *f
		c.lat, c.ttft = NewHist(), NewHist()
		c.lat.Merge(f.lat)
		c.ttft.Merge(f.ttft)
		figs[src] = &c
	}
	get := func(src int) *Figures {
		if figs[src] == nil {
			figs[src] = NewFigures()
		}
		return figs[src]
	}
	inside := func(start time.Duration) bool {
		for _, wj := range j.wins {
			if start >= wj.w.Start && (wj.w.End == 0 || start < wj.w.End) {
				return true
			}
		}
		return false
	}
	for _, s := range j.buf {
		if s.Start < runEnd && !inside(s.Start) {
			get(s.Source).Add(s)
		}
	}
	for _, p := range j.inflight {
		if p.Start < runEnd && !inside(p.Start) {
			get(p.Source).AddInFlight()
		}
	}
	out := make([]event.SourceSummary, 0, len(figs))
	for src, f := range figs {
		out = append(out, f.Summary(src))
	}
	slices.SortFunc(out, func(a, b event.SourceSummary) int { return cmp.Compare(a.Source, b.Source) })
	return out
}

// aggregate is each check judged in every window, in the order a window
// lists them: it holds when it held in every window it applies to; its
// detail names the windows it failed in.
func aggregate(windows []event.WindowVerdict) []event.Result {
	var names []string
	for _, w := range windows {
		for _, c := range windowOnly(w.Checks) {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	var out []event.Result
	for _, name := range names {
		r := event.Result{Name: name, Passed: true, Empty: true}
		var failed []string
		n := 0
		for _, w := range windows {
			for _, c := range w.Checks {
				if c.Name != name {
					continue
				}
				n++
				r.Pending += c.Pending
				r.Empty = r.Empty && c.Empty
				if !c.Passed {
					r.Passed = false
					failed = append(failed, fmt.Sprintf("window %d (%s source-%d at %s): %s", w.Index, w.Kind, w.Source, secs1(w.Start), c.Detail))
				}
			}
		}
		if r.Passed {
			r.Empty = false
			r.Detail = fmt.Sprintf("held in all %d windows", n)
		} else {
			r.Detail = fmt.Sprintf("failed in %d of %d windows: %s", len(failed), n, strings.Join(failed[:min(len(failed), 3)], "; "))
			if len(failed) > 3 {
				r.Detail += fmt.Sprintf("; and %d more", len(failed)-3)
			}
		}
		out = append(out, r)
	}
	return out
}

// worstTimes are the worst detect_s and recover_s of windows: none when a
// window never detected (or, of those that recover, never recovered).
func worstTimes(windows []event.WindowVerdict) event.Times {
	var t event.Times
	never := false
	for _, w := range windows {
		if w.Times.DetectS == nil {
			never = true
		} else if t.DetectS == nil || *w.Times.DetectS > *t.DetectS {
			t.DetectS = w.Times.DetectS
		}
	}
	if never {
		t.DetectS = nil
	}
	never = false
	for _, w := range windows {
		if !w.Recovers {
			continue
		}
		if w.Times.RecoverS == nil {
			never = true
		} else if t.RecoverS == nil || *w.Times.RecoverS > *t.RecoverS {
			t.RecoverS = w.Times.RecoverS
		}
	}
	if never {
		t.RecoverS = nil
	}
	return t
}

// Kinds is what the windows of each fault kind came to, in the order the
// kinds first appear.
func Kinds(windows []event.WindowVerdict) []event.KindSummary {
	var out []event.KindSummary
	at := map[string]int{}
	for _, w := range windows {
		i, ok := at[w.Kind]
		if !ok {
			i = len(out)
			at[w.Kind] = i
			out = append(out, event.KindSummary{Kind: w.Kind})
		}
		k := &out[i]
		k.Count++
		if w.Passed {
			k.Passed++
		} else {
			k.Failed++
		}
		if d := w.Times.DetectS; d == nil {
			k.NotDetected++
		} else if k.WorstDetectS == nil || *d > *k.WorstDetectS {
			k.WorstDetectS = d
		}
		if !w.Recovers {
			continue
		}
		if r := w.Times.RecoverS; r == nil {
			k.NotRecovered++
		} else if k.WorstRecoverS == nil || *r > *k.WorstRecoverS {
			k.WorstRecoverS = r
		}
	}
	return out
}

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
		if inWindow(s.Start, 0, runEnd) { // one sent after the run's end is not judged (Evaluate's rule)
			j.buf = append(j.buf, s)
		}
	}
	slices.SortFunc(j.buf, cmpStart)
	j.Advance(runEnd + Lag)
	return j.Verdict(now, runEnd, true)
}
