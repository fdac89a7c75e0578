package experiment

import (
	"fmt"
	"sync"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// verdicts is the run's judging: the judge, fed every pull as it is sent
// and as it ends, and the fault windows in order. Its lock guards the
// judge and the windows and is never held across a call out of the type:
// the verdicts are sent after it is let go.
type verdicts struct {
	mu    sync.Mutex
	judge *check.Judge
	// judgedAt is when the last live verdict was computed, since t0.
	judgedAt time.Duration
	windows  []event.Window // in order; the last may be open (End == 0)
	// decWindows are the fault windows on decoders (targetKey < 0), which
	// the judge of the seed's checks, keyed by source, does not take:
	// check.DecoderChecks judges them over samples, every pull kept while
	// the run has several decoders.
	decWindows []check.DecoderWindow
	samples    []event.Sample
	keep       bool // several decoders: samples are kept (those a decoder window may still judge: decsamples.go)
	// decSettled are the checks of the decoder windows no later pull can
	// change, by index into decWindows, judged once; keepFrom is the
	// earliest start a kept sample may have.
	decSettled map[int][]event.Result
	keepFrom   time.Duration
	pullsEnd   time.Duration // Experiment.pullsEndWithin
	// parked is each engine's parked stores as its scrapes read them since
	// t0, by engine name (check.ParkedChecks), when it exports them: those
	// a decoder window may still judge (parked.go).
	parked         map[string][]check.ParkedPoint
	parkedSettled  map[int]event.Result // by index into decWindows
	parkedPrunedAt time.Duration        // the last pruneParked's
	parkedSources  []string
	// parkedBound and lookback are the parked check's bound and baseline
	// lookback (Experiment.parkedSetup).
	parkedBound, lookback time.Duration
}

func (v *verdicts) started(p event.PullStart) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.judge.Started(p)
}

func (v *verdicts) ended(s event.Sample) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.judge.Ended(s)
	if v.keep && s.Start >= v.keepFrom {
		v.samples = append(v.samples, s)
		if len(v.samples)%pruneEvery == 0 {
			// s just ended: every pull sent pullsEnd before has too.
			v.prune(s.End() - v.pullsEnd)
		}
	}
}

// decoderOpened reports whether a fault window on a decoder has opened:
// a scripted run whose fault was on a decoder had its fault window.
func (v *verdicts) decoderOpened() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.decWindows) > 0
}

// openDecoder starts a window on decoder d (on its link with source
// pairSrc alone when that is not -1); closeDecoder ends its open one.
func (v *verdicts) openDecoder(d, pairSrc int, kind string, at time.Duration, recovers bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.decWindows = append(v.decWindows, check.DecoderWindow{Decoder: d, Pair: pairSrc >= 0, Source: pairSrc, Kind: kind, Start: at, Recovers: recovers})
}

func (v *verdicts) closeDecoder(d int, at time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := len(v.decWindows) - 1; i >= 0; i-- {
		if w := &v.decWindows[i]; w.Decoder == d && w.End == 0 {
			w.End = max(at, w.Start+1)
			return true
		}
	}
	return false
}

func (v *verdicts) stop(runEnd time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.judge.Stop(runEnd)
}

func (v *verdicts) verified(ver event.Verification) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.judge.Verified(ver)
}

// settle lets the judge judge the pulls it can by now and returns the
// verdict of every window that settled.
func (v *verdicts) settle(now time.Duration) []event.WindowVerdict {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.judge.Advance(now)
	return v.judge.Settled()
}

// crossed reports whether a pull in flight broke a bound of a window not
// settled yet since the last live verdict.
func (v *verdicts) crossed(now time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.judge.Crossed(v.judgedAt, now)
}

// verdict is the judge's verdict at now (check.Judge.Verdict).
func (v *verdicts) verdict(now, runEnd time.Duration, final bool) (event.Verdict, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.judgedAt = now
	return v.judge.Verdict(max(now, runEnd), runEnd, final)
}

// opened reports whether a fault window has opened.
func (v *verdicts) opened() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.windows) > 0
}

// windowsNow is a copy of the windows so far.
func (v *verdicts) windowsNow() []event.Window {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]event.Window(nil), v.windows...)
}

// allWindowsNow is windowsNow and the decoders' windows, as windows on
// their keys (targetKey): what a scripted run's end waits for.
func (v *verdicts) allWindowsNow() []event.Window {
	ws := v.windowsNow()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range v.decWindows {
		ws = append(ws, event.Window{Source: -1 - d.Decoder, Start: d.Start, End: d.End, Recovers: d.Recovers, Kind: d.Kind})
	}
	return ws
}

func (v *verdicts) open(w event.Window) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.windows = append(v.windows, w)
	v.judge.Open(w)
}

// close ends the open window on src at t, if any, and returns it.
func (v *verdicts) close(src int, t time.Duration) (event.Window, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := len(v.windows) - 1; i >= 0; i-- {
		if w := &v.windows[i]; w.Source == src && w.End == 0 {
			w.End = max(t, w.Start+1)
			w.Recovers = true
			v.judge.Close(*w)
			return *w, true
		}
	}
	return event.Window{}, false
}

// advance lets the judge judge the pulls it can and sends the verdict of
// every window that settled.
func (e *Experiment) advance() {
	settled := e.verdicts.settle(e.run.since())
	for i := range settled {
		e.emit(event.Event{Kind: event.KindWindowVerdict, WindowVerdict: &settled[i]})
	}
}

// pendingCrossed reports whether a pull in flight broke a bound of a
// window not settled yet since the last live verdict.
func (e *Experiment) pendingCrossed() bool { return e.verdicts.crossed(e.run.since()) }

func (e *Experiment) emitLiveVerdict() {
	if !e.verdicts.opened() {
		return
	}
	v := e.verdictAt(e.run.since(), false)
	e.emit(event.Event{Kind: event.KindVerdict, Verdict: &v})
}

// verdictAt is the judge's verdict on the run so far (judged to runEnd)
// and the pulls in flight now: every fault window on its own, the run on
// the window check.Judged picks when it had one (the scripted fault's, or
// on the dashboard the latest fault's) or on all of them. The final
// verdict also carries each source's steady-state summary and every
// window; a live one the windows not settled yet.
func (e *Experiment) verdictAt(runEnd time.Duration, final bool) event.Verdict {
	v, ok := e.verdicts.verdict(e.run.since(), runEnd, final)
	if !ok {
		v = e.noWindowVerdict(v, runEnd)
	}
	checks := e.verdicts.decoderChecks(e.cfg.Bounds.Scaled(e.cfg.TimeScale), e.plan.Decoders, runEnd, e.run.since()-e.pullsEndWithin())
	checks = append(checks, e.verdicts.parkedChecks(runEnd)...)
	for _, c := range checks {
		if check.LaggedOut(c) {
			// Failed only where p2pfault lagged: not judged (exit 3), as
			// a source window is (check/lag.go).
			v.NotJudged = append(v.NotJudged, c.Name+": "+c.Detail)
			v.Passed = false
			continue
		}
		v.Checks = append(v.Checks, c)
		v.Passed = v.Passed && c.Passed
	}
	return v
}

// noWindowVerdict is the judge's verdict v of a run no fault window opened
// in, as the run gives it: without the judge's all_200 (a report rebuilt
// from the events keeps it), and for a scripted run failing fault_window
// first.
func (e *Experiment) noWindowVerdict(v event.Verdict, runEnd time.Duration) event.Verdict {
	var checks []event.Result
	if len(e.timeline) > 0 && !e.verdicts.decoderOpened() {
		// A scripted run that ended before its fault checked nothing:
		// say so rather than pass.
		detail := fmt.Sprintf("empty window: the run ended at %.1fs, before the scripted fault at %.1fs",
			runEnd.Seconds(), e.timeline[0].At.Seconds())
		if runEnd > e.timeline[0].At {
			detail = fmt.Sprintf("empty window: the scripted fault at %.1fs never took effect (see its warning)", e.timeline[0].At.Seconds())
		}
		checks = append(checks, event.Result{Name: NameFaultWindow, Empty: true, Detail: detail})
	}
	// Faults without a window (a kind of its own) were still fired, and
	// the texts are compared (the judge's fault_took_effect and
	// content_matches).
	for _, c := range v.Checks {
		if c.Name != check.NameAll200 {
			checks = append(checks, c)
		}
	}
	v.Checks, v.Passed = checks, true
	for _, c := range checks {
		v.Passed = v.Passed && c.Passed
	}
	return v
}

// openWindow starts a fault window of kind on src; recovers says whether
// it will close (stall, kill) or last to the end of the run (remove).
func (e *Experiment) openWindow(src int, target, kind string, at time.Time, recovers bool) {
	w := event.Window{Source: src, Target: target, Start: e.run.rel(at), Recovers: recovers, Kind: kind}
	e.verdicts.open(w)
	e.emit(event.Event{Kind: event.KindWindow, Window: &w})
	e.setPhase(event.PhaseFault)
}

// closeWindow ends the open window on src, if any.
func (e *Experiment) closeWindow(src int, at time.Time) {
	if src < 0 {
		if e.verdicts.closeDecoder(-1-src, e.run.rel(at)) {
			e.setPhase(event.PhaseRecovery)
		}
		return
	}
	if w, ok := e.verdicts.close(src, e.run.rel(at)); ok {
		e.emit(event.Event{Kind: event.KindWindow, Window: &w})
		e.setPhase(event.PhaseRecovery)
	}
}
