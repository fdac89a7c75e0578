package ui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/probe"
)

// maxSources bounds how many source panels a (possibly malformed) event
// stream can make the dashboard allocate.
const maxSources = 64

// point is one finished pull, kept compact because each source's ring holds
// a whole chart window of them.
type point struct {
	end     time.Duration // since t0
	latency time.Duration
	hit     bool
	ok      bool          // HTTP 200 and no transport error
	ttft    time.Duration // streamed pulls: time to first token (0 = none)
	wrong   bool          // another text than the source's (check content_matches)
	rank    int           // the data-parallel rank the pull was pinned to
}

// start is when the pull was sent: the chart plots it there.
func (p point) start() time.Duration { return p.end - p.latency }

// span is a fault window on a source, marked on its chart.
type span struct {
	start, end time.Duration
	open       bool
	// causes counts the pulls naming the source started in the window by
	// what ended them (the samples' causes); nil until one carries a cause
	// (a pointer: spans stay comparable).
	causes *causeTally
	// recovers: the window has a recovery window after it (stall, kill),
	// whose pulls after counts by cause, as the report's why table does
	// (sent "after"); nil until one of them carries a cause.
	recovers bool
	after    *causeTally
}

// causeTally is a window's pulls by cause.
type causeTally struct{ n map[event.Cause]int }

// holds reports whether a pull started at t is in the window.
func (sp *span) holds(t time.Duration) bool {
	return t >= sp.start && (sp.open || t < sp.end)
}

// followedBy reports whether a pull started at t is in the recovery
// window of length rec after the closed window, [end, end+rec).
func (sp *span) followedBy(t, rec time.Duration) bool {
	return sp.recovers && !sp.open && t >= sp.end && t < sp.end+rec
}

// count adds c to the tally at *tp, made on the first.
func count(tp **causeTally, c event.Cause) {
	if *tp == nil {
		*tp = &causeTally{n: map[event.Cause]int{}}
	}
	(*tp).n[c]++
}

// sourceState is what the dashboard knows of one source.
type sourceState struct {
	index  int
	points ring[point]
	spans  ring[span]

	// Counts over the whole run: O(1) memory however long it lasts.
	n, ok200, errs, pulled int64
	wrong                  int64 // pulls that returned other text than the source's

	// cond is the source's condition as the experiment last sent it (nil
	// before the first): the badge shows it, the keys are refused by it.
	cond *event.ConditionInfo
}

func (s *sourceState) openSpan() *span {
	if s.spans.Len() == 0 {
		return nil
	}
	i := (s.spans.head + s.spans.n - 1) % len(s.spans.buf)
	if !s.spans.buf[i].open {
		return nil
	}
	return &s.spans.buf[i]
}

func (s *sourceState) lastSpan() *span {
	if s.spans.Len() == 0 {
		return nil
	}
	return &s.spans.buf[(s.spans.head+s.spans.n-1)%len(s.spans.buf)]
}

// engineState is one engine's latest process state and its last log lines.
type engineState struct {
	info      event.EngineInfo
	logs      ring[string]
	everReady bool
	reported  bool // a KindEngine event named it (not only a log line)
}

// logLevel tells the event log how to style an entry.
type logLevel int

const (
	levelInfo logLevel = iota
	levelFault
	levelWarn
	levelError
)

// logEntry is one line of the dashboard's event log.
type logEntry struct {
	at    time.Duration // since t0
	level logLevel
	text  string
}

// state is everything the dashboard derived from the run's events. The
// Model owns it; panels only read it.
type state struct {
	run      *event.RunInfo
	phase    event.Phase
	sources  []*sourceState
	engines  map[string]*engineState
	log      ring[logEntry]
	verdict  *event.Verdict
	final    bool
	probing  bool
	outRange int64 // samples naming a source index out of range, dropped

	// anchor maps wall time to run time (since t0): the latest event's
	// (T, Wall), so the clock keeps moving between events.
	anchorT    time.Duration
	anchorWall time.Time
	firstWall  time.Time
	latestT    time.Duration

	ended    bool
	endSeen  bool // the run's end event came (not only the stream's close)
	endMsg   string
	exitCode int
	endT     time.Duration
	endWall  time.Time

	startFailed bool
	failures    []string // warnings and the end message seen before the cluster was up

	maxPoints int

	// inflight is the pulls sent and not ended (pull_start events, ended
	// by their samples); sawStarts says the stream tells pulls' starts,
	// so the panels keep a line for them.
	inflight  *probe.InFlight
	sawStarts bool
	// peers are the P2P address each source's pulls name now (address
	// events), waits what the pulls naming a peer wait on as the decoder's
	// log says (wait events): the source panel's in-flight line names it.
	peers map[int]string
	waits map[string]event.Wait
	// metrics is each engine's latest /metrics reading (metrics events).
	metrics map[string]event.MetricsInfo
	// lookup is the decoder's lookup delay per fault window and the
	// baseline before the first (lookupwin.go).
	lookup lookupWindows
	// content is the run's content rule (its run event); wrongLogged
	// counts the mismatches the event log told one a line.
	content     check.ContentRule
	wrongLogged int
	// schedule is the run's fault schedule (its schedule event), in time
	// order: the header counts down to its next step.
	schedule []event.ScheduledFault
	// windows are the fault windows judged fault by fault (window_verdict
	// events and the live verdicts' unsettled ones), by index, at most
	// maxWindowRows; kinds the latest verdict's per-kind summary.
	windows []event.WindowVerdict
	kinds   []event.KindSummary
}

// maxWrongLogged bounds the mismatches the event log tells one a line: the
// source panels count them all (wrong N).
const maxWrongLogged = 10

func newState(maxPoints, logLines int) *state {
	return &state{
		inflight:  probe.NewInFlight(),
		peers:     map[int]string{},
		waits:     map[string]event.Wait{},
		metrics:   make(map[string]event.MetricsInfo),
		engines:   make(map[string]*engineState),
		log:       newRing[logEntry](logLines),
		probing:   true,
		maxPoints: maxPoints,
	}
}

// nowT is the run time (since t0) at wall time now. It stops at the end of
// the run so the final charts stay on screen.
func (st *state) nowT(now time.Time) time.Duration {
	if st.ended {
		return st.endT
	}
	if st.anchorWall.IsZero() {
		return st.anchorT
	}
	return st.anchorT + now.Sub(st.anchorWall)
}

// elapsed is the wall time since the run started, stopped at its end.
func (st *state) elapsed(now time.Time) time.Duration {
	start := st.firstWall
	if st.run != nil && !st.run.Started.IsZero() {
		start = st.run.Started
	}
	if start.IsZero() {
		return 0
	}
	if st.ended && !st.endWall.IsZero() {
		now = st.endWall
	}
	return now.Sub(start)
}

// up reports whether the cluster got past start-up: the run entered
// warm-up or a later phase, or every engine the run needs was ready.
func (st *state) up() bool {
	switch st.phase {
	case "", event.PhaseStarting:
	default:
		return true
	}
	if st.run == nil {
		return false
	}
	ready := 0
	for _, e := range st.engines {
		if e.everReady {
			ready++
		}
	}
	return ready >= st.run.Sources+1
}

func (st *state) timeScale() float64 {
	if st.run == nil {
		return event.DefaultTimeScale
	}
	return event.TimeScaleOf(st.run.TimeScale)
}

func (st *state) addLog(at time.Duration, level logLevel, format string, args ...any) {
	st.log.Push(logEntry{at: at, level: level, text: clean(fmt.Sprintf(format, args...))})
}

// source returns the state of source i, creating it (and those before it)
// on first sight; nil when i is out of range.
func (st *state) source(i int) *sourceState {
	if i < 0 || i >= maxSources {
		return nil
	}
	for len(st.sources) <= i {
		st.sources = append(st.sources, &sourceState{
			index:  len(st.sources),
			points: newRing[point](st.maxPoints),
			spans:  newRing[span](32),
		})
	}
	return st.sources[i]
}

// engineOrder lists engines as the process table shows them: sources by
// index, then the decoder and anything else by name.
func (st *state) engineOrder() []*engineState {
	out := make([]*engineState, 0, len(st.engines))
	for _, e := range st.engines {
		if e.reported {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		ea, eb := out[a].info, out[b].info
		sa, sb := ea.Role == event.RoleSource, eb.Role == event.RoleSource
		if sa != sb {
			return sa
		}
		if sa && ea.Index != eb.Index {
			return ea.Index < eb.Index
		}
		return ea.Name < eb.Name
	})
	return out
}

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
			if m.Engine == decoderEngine {
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
	if st.source(f.Source) == nil {
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
		p := point{end: sm.End(), latency: sm.Latency, hit: sm.Hit(), ok: sm.Status == 200 && sm.Err == "", ttft: sm.TTFT, rank: sm.Rank,
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

// badgeKind is a source's state as the badge shows it.
type badgeKind int

const (
	badgeUnknown badgeKind = iota
	badgeStarting
	badgeReady
	badgeStalled
	badgeKilled
	badgeRestarting
	badgeRemoved
	badgeExited
	badgeNetwork // partitioned or lossy until healed
)

// badge is source i's badge: the label of the condition the experiment
// sent (a stall's counting down to its end), in its condition's colours.
func (st *state) badge(i int, nowT time.Duration) (badgeKind, string) {
	if i < 0 || i >= len(st.sources) || st.sources[i].cond == nil {
		return badgeUnknown, "WAITING"
	}
	c := st.sources[i].cond
	text := c.Label
	if c.Condition == event.CondStalled && c.Until > 0 {
		text += " " + fmtCountdown(c.Until-nowT)
	}
	return conditionBadge(*c), text
}

// faultedRank is the rank of source i a fault in force acts on alone, as
// the condition's Target names it ("rank1" of "source-0/rank1"); "" when
// none does.
func (st *state) faultedRank(i int) string {
	if i < 0 || i >= len(st.sources) || st.sources[i].cond == nil {
		return ""
	}
	_, rank, ok := strings.Cut(st.sources[i].cond.Target, "/")
	if !ok {
		return ""
	}
	return rank
}

// conditionBadge is the colours of a condition.
func conditionBadge(c event.ConditionInfo) badgeKind {
	switch c.Condition {
	case event.CondUp:
		return badgeReady
	case event.CondStalled:
		return badgeStalled
	case event.CondNetwork:
		return badgeNetwork
	case event.CondRestarting:
		if c.Down {
			return badgeKilled
		}
		return badgeRestarting
	case event.CondRemoved:
		return badgeRemoved
	case event.CondExited, event.CondUnreachable:
		return badgeExited
	case event.CondStarting:
		return badgeStarting
	}
	if c.Fault != "" {
		// A kind's condition of its own (busy): a fault in force.
		return badgeStalled
	}
	return badgeUnknown
}
