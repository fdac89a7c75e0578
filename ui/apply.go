package ui

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/probe"
)

// apply folds one event into the state. keep is how far back, in run time,
// samples are still needed (the longest window shown).
func (st *state) apply(ev event.Event, keep time.Duration) {
	st.anchor(ev)
	switch ev.Kind {
	case event.KindRun:
		st.applyRun(ev)
	case event.KindPhase:
		st.applyPhase(ev)
	case event.KindEngine:
		st.applyEngine(ev)
	case event.KindLog:
		st.applyLog(ev)
	case event.KindFault:
		st.applyFault(ev)
	case event.KindWindow:
		st.applyWindow(ev)
	case event.KindSamples:
		st.applySamples(ev.Samples, keep)
	case event.KindWarning:
		st.applyWarning(ev)
	case event.KindVerdict:
		st.applyVerdict(ev)
	case event.KindEnd:
		st.applyEnd(ev)
		// The run's pulls were ended or abandoned with it.
		st.inflight = probe.NewInFlight()
		clear(st.waits)
	case event.KindPullStart:
		st.sawStarts = true
		for _, p := range ev.Pulls {
			st.inflight.Started(p)
		}
	case event.KindMetrics:
		if m := ev.Metrics; m != nil && m.Engine != "" && (len(st.metrics) < maxEngines || hasKey(st.metrics, m.Engine)) {
			st.metrics[m.Engine] = *m
			if m.Engine == event.DecoderName(0, st.run.Decoders) {
				st.lookup.addReading(ev.T, m.Reading)
			}
		}
	case event.KindSchedule:
		if ev.Schedule != nil {
			st.schedule = ev.Schedule.Steps
		}
	case event.KindWindowVerdict:
		st.applySettled(ev)
	case event.KindCondition:
		st.applyCondition(ev)
	case event.KindAddress:
		st.applyAddress(ev)
	case event.KindWait:
		if w := ev.Wait; w != nil && w.Open {
			st.waits[w.Peer] = *w
		} else if w != nil {
			delete(st.waits, w.Peer)
		}
	case event.KindVerification:
		st.applyVerification(ev)
	case event.KindLoad:
		st.applyLoad(ev)
	case event.KindLink:
		st.applyLinks(ev)
	}
}

// anchor moves the run clock to ev: the latest event's (T, Wall), so the
// clock keeps moving between events.
func (st *state) anchor(ev event.Event) {
	if !ev.Wall.IsZero() {
		if st.firstWall.IsZero() {
			st.firstWall = ev.Wall
		}
		if !st.ended {
			st.anchorT, st.anchorWall = ev.T, ev.Wall
		}
	} else if !st.ended {
		st.anchorT = ev.T
	}
	if ev.T > st.latestT {
		st.latestT = ev.T
	}
}

func (st *state) applyPhase(ev event.Event) {
	if ev.Phase != "" && ev.Phase != st.phase {
		st.phase = ev.Phase
		st.addLog(ev.T, levelInfo, "phase: %s", ev.Phase)
	}
}

func (st *state) applyLog(ev event.Event) {
	if ev.Log == nil {
		return
	}
	if e := st.engine(ev.Log.Engine); e != nil {
		e.logs.Push(clean(ev.Log.Line))
	}
	st.addLog(ev.T, levelInfo, "[%s] %s", ev.Log.Engine, ev.Log.Line)
}

func (st *state) applyWarning(ev event.Event) {
	st.addLog(ev.T, levelWarn, "warning: %s", ev.Message)
	if !st.up() {
		st.startFailed = true
		st.addFailure(ev.Message)
	}
}

func (st *state) applyCondition(ev event.Event) {
	if c := ev.Condition; c != nil && c.Source < 0 && st.run != nil {
		// A decoder's (the experiment's key -1-d): its process row's badge.
		if e := st.engine(event.DecoderName(-1-c.Source, st.run.Decoders)); e != nil {
			cc := *c
			e.cond = &cc
		}
		return
	}
	if c := ev.Condition; c != nil {
		if s := st.source(c.Source); s != nil {
			cc := *c
			s.cond = &cc
		}
	}
}

// applyAddress: a source's first address is the run's own (the process
// table shows its ports); a new one (a replace) goes in the log.
func (st *state) applyAddress(ev event.Event) {
	if a := ev.Address; a != nil {
		st.peers[a.Source] = a.P2P
	}
	if a := ev.Address; a != nil && a.Prev != "" {
		st.addLog(ev.T, levelInfo, "%s: pulls name %s from now on, not %s", event.SourceName(a.Source), a.P2P, a.Prev)
	}
}

func (st *state) applyVerification(ev event.Event) {
	if v := ev.Verification; v != nil {
		level, what := levelInfo, "took effect"
		if !v.Verified || v.After > check.DefaultVerifyWithin {
			level, what = levelWarn, "did NOT take effect"
		}
		st.addLog(ev.T, level, "%s %s %s (%s): %s", v.Action, v.TargetName(), what, fmtLatency(v.After), v.Detail)
	}
}

// applyLoad logs a fault's own load when it stopped: what it sent and
// what came of it (the reports while it runs are the source's queues on
// the process table).
func (st *state) applyLoad(ev event.Event) {
	if l := ev.Load; l != nil && l.Final {
		st.addLog(ev.T, levelInfo, "%s %s load stopped: %d sent, %d answered (p50 %s, max %s), %d failed, %d cancelled at the end",
			l.Kind, event.SourceName(l.Source), l.Sent, l.Answered, fmtLatency(l.P50), fmtLatency(l.Max), l.Failed, l.Cancelled)
	}
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

func (st *state) applyRun(ev event.Event) {
	if ev.Run == nil {
		return
	}
	run := *ev.Run
	st.run = &run
	st.content = check.ContentRuleOf(run)
	for i := 0; i < run.Sources && i < maxSources; i++ {
		st.source(i)
	}
	mode := ""
	if event.ModeOf(run.Mode) != event.ModeP2P {
		mode = ", mode " + run.Mode
	}
	st.addLog(ev.T, levelInfo, "run: case %s, arm %s%s, %d sources on %s, time scale %g",
		orDash(run.Case), orDash(run.Arm), mode, run.Sources, orDash(run.Engine), st.timeScale())
}

// maxEngines bounds the engines a malformed stream can make the dashboard track.
const maxEngines = 2*maxSources + 8

// engine returns the named engine's state, creating it on first sight;
// nil once maxEngines are tracked.
func (st *state) engine(name string) *engineState {
	e, ok := st.engines[name]
	if !ok {
		if len(st.engines) >= maxEngines {
			return nil
		}
		e = &engineState{info: event.EngineInfo{Name: name}, logs: newRing[string](64)}
		st.engines[name] = e
	}
	return e
}

func (st *state) applyEngine(ev event.Event) {
	if ev.Engine == nil || ev.Engine.Name == "" {
		return
	}
	info := *ev.Engine
	info.Members = append([]int(nil), info.Members...)
	e := st.engine(info.Name)
	if e == nil {
		return
	}
	known, prev := e.reported, e.info.StateText()
	e.info, e.reported = info, true
	if info.Role == event.RoleSource {
		st.source(info.Index)
	}
	if info.State == event.StateReady {
		e.everReady = true
	}
	if known && prev == info.StateText() {
		return
	}
	switch {
	case info.State == event.StateExited:
		exit := info.Exit
		if exit == "" {
			exit = "no exit status"
		}
		st.addLog(ev.T, levelWarn, "%s exited (%s)", info.Name, exit)
	case info.State == event.StateReady && len(info.StoppedRanks) == 0:
		st.addLog(ev.T, levelInfo, "%s ready (pid %d, :%d)", info.Name, info.Pid, info.HTTPPort)
	default:
		st.addLog(ev.T, levelInfo, "%s %s (pid %d)", info.Name, info.StateText(), info.Pid)
	}
}

// applyFault logs a fault action. The chart's fault windows come from the
// window events alone (applyWindow): the experiment sends one for every
// window a fault opens or closes, at the instant it took effect (a stall's
// stop, a kill's signal), which the fault event does not carry.
func (st *state) applyFault(ev event.Event) {
	f := ev.Fault
	if f == nil {
		return
	}
	by := f.By
	if by == "" {
		by = "script"
	}
	if f.Err != "" {
		st.addLog(ev.T, levelError, "%s %s (%s) failed: %s", f.Action, f.TargetName(), by, f.Err)
		return
	}
	// A decoder's fault names its decoder in Target and has no source.
	if !strings.HasPrefix(f.Target, "decoder-") && st.source(f.Source) == nil {
		st.addLog(ev.T, levelWarn, "%s on source %d, which is out of range", f.Action, f.Source)
		return
	}
	what := fmt.Sprintf("%s %s (%s)", f.Action, f.TargetName(), by)
	if k, _ := fault.Lookup(f.Action); k != nil && k.Opens && k.TakesFor && f.Duration > 0 {
		what += " for " + fmtSpan(f.Duration)
	}
	st.addLog(ev.T, levelFault, "%s", what)
}

func (st *state) applyWindow(ev event.Event) {
	w := ev.Window
	if w == nil {
		return
	}
	if lw, base, ok := st.lookup.window(*w); ok {
		defer st.addLog(ev.T, levelInfo, "%s", lookupWindowText(lw, base))
	}
	s := st.source(w.Source)
	if s == nil {
		return
	}
	if w.End == 0 {
		if sp := s.openSpan(); sp != nil {
			sp.start = w.Start // the same window sent again
		} else {
			s.spans.Push(span{start: w.Start, open: true, recovers: w.Recovers})
		}
		st.addLog(ev.T, levelFault, "fault window opened on %s", w.TargetName())
		return
	}
	switch sp := s.lastSpan(); {
	case sp != nil && (sp.open || sp.start == w.Start):
		sp.start, sp.end, sp.open, sp.recovers = w.Start, w.End, false, w.Recovers
	default:
		s.spans.Push(span{start: w.Start, end: w.End, recovers: w.Recovers})
	}
	st.addLog(ev.T, levelFault, "fault window on %s closed after %s", w.TargetName(), fmtLatency(w.End-w.Start))
}

func (st *state) applySamples(samples []event.Sample, keep time.Duration) {
	for i := range samples {
		sm := &samples[i]
		st.inflight.Ended(*sm)
		s := st.source(sm.Source)
		if s == nil {
			if st.outRange == 0 {
				st.addLog(st.latestT, levelWarn, "dropping samples naming source %d: out of range", sm.Source)
			}
			st.outRange++
			continue
		}
		p := point{end: sm.End(), latency: sm.Latency, hit: sm.Hit(), ok: sm.Status == 200 && sm.Err == "", ttft: sm.TTFT, rank: sm.Rank, decoder: sm.Decoder,
			wrong: st.content.Wrong(*sm)}
		s.points.Push(p)
		if p.wrong {
			s.wrong++
			st.logWrong(*sm)
		}
		s.n++
		if sm.Status == 200 {
			s.ok200++
		}
		if !p.ok {
			s.errs++
		}
		if p.hit {
			s.pulled++
		}
		if p.end > st.latestT {
			st.latestT = p.end
		}
		st.countCause(s, *sm)
	}
	if st.run != nil {
		// The slow pulls of the batch, named by what ended them.
		for _, g := range event.SlowByCause(samples, st.run.Bounds.HealthyMax) {
			st.addLog(st.latestT, levelWarn, "slow: %s", g.Words(fmtLatency))
		}
	}
	// Drop what no window shows any more. Samples arrive roughly in the
	// order they end, so the oldest are at the front.
	horizon := st.latestT - keep
	for _, s := range st.sources {
		for s.points.Len() > 0 && s.points.Front().end < horizon {
			s.points.PopFront()
		}
	}
}

// recoveryWindow is the run's recovery bound (0 before the run event).
func (st *state) recoveryWindow() time.Duration {
	if st.run == nil {
		return 0
	}
	return st.run.Bounds.RecoveryWindow
}

// countCause counts sm's cause in each fault window of s it started in,
// or in the recovery window after, as the report's why table does (a pull
// in one window's recovery and the next window counts in both).
func (st *state) countCause(s *sourceState, sm event.Sample) {
	if sm.Cause == "" {
		return
	}
	rec := st.recoveryWindow()
	for i := s.spans.Len() - 1; i >= 0; i-- {
		sp := &s.spans.buf[(s.spans.head+i)%len(s.spans.buf)]
		switch {
		case sp.holds(sm.Start):
			count(&sp.causes, sm.Cause)
		case sp.followedBy(sm.Start, rec):
			count(&sp.after, sm.Cause)
		}
	}
}

// logWrong tells the event log of a pull that returned other text than its
// source's completion, the first maxWrongLogged of them.
func (st *state) logWrong(sm event.Sample) {
	st.wrongLogged++
	switch {
	case st.wrongLogged <= maxWrongLogged:
		st.addLog(sm.End(), levelError, "wrong text: %s pull sent at %s (cached %d) returned %s, the source's is %s",
			event.SourceName(sm.Source), fmtRunTime(sm.Start), sm.CachedTokens, check.QuoteText(sm.PullText), check.QuoteText(sm.SourceText))
	case st.wrongLogged == maxWrongLogged+1:
		st.addLog(sm.End(), levelError, "wrong text: more pulls returned other text than the source's; the source panels count them (wrong N)")
	}
}

func (st *state) applyVerdict(ev event.Event) {
	if ev.Verdict == nil {
		return
	}
	v := *ev.Verdict
	v.Checks = append([]event.Result(nil), v.Checks...)
	for _, w := range v.Windows {
		st.applyWindowVerdict(w)
	}
	if v.Kinds != nil {
		st.kinds = v.Kinds
	}
	v.Windows = nil // kept in st.windows, bounded
	st.verdict = &v
	st.final = ev.Final
	if !ev.Final {
		return
	}
	if v.Passed {
		st.addLog(ev.T, levelInfo, "verdict: PASS")
		return
	}
	if !v.Failed() {
		st.addLog(ev.T, levelWarn, "verdict: NOT JUDGED (%s)", strings.Join(v.NotJudged, "; "))
		return
	}
	var failed []string
	for _, c := range v.Checks {
		if !c.Passed {
			failed = append(failed, c.Name)
		}
	}
	st.addLog(ev.T, levelError, "verdict: FAIL (%s)", strings.Join(failed, ", "))
}

func (st *state) applyEnd(ev event.Event) {
	if st.ended {
		return
	}
	wasUp := st.up()
	st.ended, st.endSeen = true, true
	st.endMsg = clean(ev.Message)
	st.exitCode = ev.ExitCode
	st.endT = ev.T
	st.endWall = ev.Wall
	level := levelInfo
	if ev.ExitCode != 0 {
		level = levelError
	}
	st.addLog(ev.T, level, "run ended: %s (exit %d)", orDash(ev.Message), ev.ExitCode)
	if !wasUp && ev.ExitCode != 0 {
		st.startFailed = true
		if ev.Message != "" {
			st.addFailure(ev.Message)
		}
	}
}

// cutShort reports whether the run ended before its planned end (a
// signal, an error, a stream that closed without an end event): its
// verdict then reads INTERRUPTED unless a bound had broken.
func (st *state) cutShort() bool {
	return st.ended && exitcode.RunCutShort(st.endSeen, st.exitCode, st.run != nil && st.run.Duration == 0)
}

// closeStream records that the event channel closed; a run that ends
// without a KindEnd event still ends.
func (st *state) closeStream(now time.Time) {
	if st.ended {
		return
	}
	t := st.nowT(now)
	st.ended = true
	st.endMsg = "the event stream closed"
	st.endT = t
	st.endWall = now
	st.addLog(t, levelWarn, "the event stream closed before the run ended")
	if !st.up() {
		st.startFailed = true
		st.addFailure("the experiment stopped before the cluster was up")
	}
}

// addFailure keeps the last few reasons the cluster did not come up.
func (st *state) addFailure(msg string) {
	const keep = 5
	st.failures = append(st.failures, clean(msg))
	if n := len(st.failures); n > keep {
		st.failures = append(st.failures[:0], st.failures[n-keep:]...)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
