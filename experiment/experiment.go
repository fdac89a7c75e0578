// Package experiment runs one fault experiment (cluster + warm-up + probe +
// fault timeline + checks) and reports it as a stream of typed events
// (package event). The dashboard, the headless printer and the report
// writers are faces that read the same events; none of them touches a
// process.
package experiment

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"p2pfault/cause"
	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/probe"
)

// NameFaultWindow is the check a scripted run fails when it ended before
// its fault fired (interrupted): there was no window to check.
const NameFaultWindow = "fault_window"

// Experiment is one run. Faces Subscribe before Run; the dashboard also
// drives it through its Controller methods.
type Experiment struct {
	cfg      Config
	plan     Plan           // the cluster as its Opener planned it
	timeline fault.Timeline // scaled

	bus  *bus       // where events go: the experiment's own, or its Group's
	line *startLine // the arms' shared t0: the experiment's own, or its Group's

	mu      sync.Mutex
	lined   bool // arrived at (or left) the start line
	start   time.Time
	t0      time.Time // zero until warm-up ends
	cluster Cluster
	prober  *probe.Prober
	// judge judges the run as it goes, from running figures: the
	// experiment keeps no sample once it is sent (check.Judge).
	judge   *check.Judge
	pending []event.Sample
	starts  []event.PullStart // pulls sent since the last batch (KindPullStart)
	// judgedAt is when the last live verdict was computed, since t0.
	judgedAt time.Duration
	// verifying is, per source, closed when the last action's
	// verification is done (faults.go).
	verifying map[int]chan struct{}
	windows   []event.Window // in order; the last may be open (End == 0)
	phase     event.Phase
	faults    map[int]inForce             // source index -> the fault in force (stalled, restarting, removed, ...)
	conds     map[int]event.ConditionInfo // source index -> its condition as last sent (condition.go)
	condMu    sync.Mutex                  // one condition computed and sent at a time, in order
	held      map[int]any                 // source index -> the open fault's handle (a stall to resume)
	ctx       context.Context
	fail      context.CancelCauseFunc
	settled   chan struct{} // closed when the scripted timeline has played out
	begun     chan struct{} // closed once the run event is sent (a Group starts its arms in order)
	net       *network      // the run's firewall table, made on the first network fault
	// causes names what ended each pull from the engines' lines (cause.go);
	// decoderName is the engine whose reaps bear on the pulls.
	causes      *cause.Tracker
	decoderName string
	// engaged reads the decoder's lines on its sessions from the start,
	// warmFirst and warmLast its first and latest scrape before t0: the
	// engaged gate's evidence (gate.go).
	engaged             *cause.Engagement
	warmFirst, warmLast *event.Reading
}

// New checks cfg and returns an experiment ready to Run.
func New(cfg Config) (*Experiment, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tl, err := cfg.scriptedTimeline()
	if err != nil {
		return nil, exitcode.AsUsage(err)
	}
	plan, err := cfg.Cluster.Plan(tl)
	if err != nil {
		return nil, err
	}
	if cfg.Nemesis != nil {
		if tl, err = cfg.nemesisSchedule(plan.Sources); err != nil {
			return nil, err
		}
		// The cluster checks the drawn schedule as it would a script
		// (an attached one refuses a kind its sources cannot take).
		if plan, err = cfg.Cluster.Plan(tl); err != nil {
			return nil, err
		}
	}
	text := tl.String()
	if err := tl.Check(plan.Sources, plan.Ranks); err != nil {
		return nil, err
	}
	if err := cfg.scaleTimeline(tl); err != nil {
		return nil, err
	}
	if err := setupKinds(tl, plan); err != nil {
		return nil, err
	}
	cfg.Timeline = text
	e := &Experiment{
		cfg:      cfg,
		plan:     plan,
		timeline: tl,
		faults:   map[int]inForce{},
		conds:    map[int]event.ConditionInfo{},
		held:     map[int]any{},
		judge: check.NewJudge(check.Setup{Bounds: cfg.Bounds.Scaled(cfg.TimeScale), Sources: plan.Sources, Ranks: plan.Ranks,
			Scripted: len(tl) > 0, Content: cfg.ContentMatch}),
		verifying: map[int]chan struct{}{},
		bus:       newBus(1),
		line:      newStartLine(1),
		settled:   make(chan struct{}),
		begun:     make(chan struct{}),
		net:       &network{runID: newRunID(cfg.Arm, cfg.Case)},
	}
	e.causes = e.newCauses()
	e.engaged = cause.NewEngagement()
	return e, nil
}

// Subscribe returns a channel that receives every event of the run and is
// closed when the run ends. Call it before Run. A subscriber must keep
// reading: events are never dropped, so a stuck reader stalls the run.
func (e *Experiment) Subscribe() <-chan event.Event { return e.bus.subscribe() }

// Info describes the run as planned.
func (e *Experiment) Info() event.RunInfo {
	c := e.cfg
	info := event.RunInfo{
		Arm: c.Arm, Case: c.Case, Mode: c.Mode, Engine: e.plan.Engine, TimeScale: c.TimeScale,
		Sources: e.plan.Sources, SourceRanks: e.plan.Ranks, Interval: c.scale(c.Interval), Timeline: c.Timeline,
		Bounds: c.Bounds.Scaled(c.TimeScale), Model: e.plan.Model, Started: e.start,
		FaultFor:      c.scale(c.FaultFor),
		ContentTokens: c.ContentTokens, ContentMatch: c.ContentMatch.String(),
		Settings: c.Settings,
	}
	if c.Nemesis != nil {
		info.Nemesis = fault.NemesisRandom
	}
	if len(e.timeline) > 0 {
		info.FaultAt = e.timeline[0].At
		if e.timeline[0].For > 0 {
			info.FaultFor = e.timeline[0].For
		}
		info.Duration = e.plannedEnd()
	}
	if c.Duration > 0 && (len(e.timeline) == 0 || c.Nemesis != nil) {
		info.Duration = c.scale(c.Duration)
	}
	return info
}

// plannedEnd is when the run should end if every fault window closes at
// once (a kill's restart adds its own time): each kind says how its step
// bears on the end.
func (e *Experiment) plannedEnd() time.Duration {
	var end time.Duration
	for _, s := range e.timeline {
		t := s.At
		k := s.Kind
		switch {
		case k.Ending == fault.EndsAfterFor:
			if s.For > 0 {
				t += s.For + e.cfg.scale(e.cfg.Recovery)
			}
		case k.Ending == fault.EndsWithRecovery:
			t += e.cfg.scale(e.cfg.Recovery)
		case k.Ending == fault.StaysDown:
			t += e.cfg.scale(e.cfg.FaultFor)
		}
		end = max(end, t)
	}
	return end
}

// Run starts the cluster, warms it up, probes, plays the timeline, checks
// the bounds and stops everything. The error is nil when the run completed
// (the verdict says whether the bounds held), exitcode.ErrInterrupted when
// ctx ended it, or a setup error (exit 2).
func (e *Experiment) Run(ctx context.Context) (verdict event.Verdict, err error) {
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	e.mu.Lock()
	e.start = time.Now()
	e.ctx, e.fail = ctx, fail
	e.mu.Unlock()
	defer e.closeSubs()
	defer e.leaveLine() // an arm that never measures must not hold the others

	info := e.Info()
	e.emit(event.Event{Kind: event.KindRun, Run: &info})
	if len(e.timeline) > 0 {
		// The schedule is in the events before any of it plays.
		si := e.scheduleInfo()
		e.emit(event.Event{Kind: event.KindSchedule, Schedule: &si})
	}
	select {
	case <-e.begun:
	default:
		close(e.begun)
	}
	e.setPhase(event.PhaseStarting)
	cl, err := e.startCluster(ctx)
	if err != nil {
		return e.finish(verdict, startError(ctx, err))
	}
	// Stop on every path, also a panic in this goroutine.
	defer e.stopCluster(cl, &verdict, &err)
	// Delete the run's firewall table (if a network fault made one)
	// before the engines stop, on every path too.
	defer e.closeNetwork(&err)
	e.emitEngines()
	e.startPollers(ctx, cl)

	e.setPhase(event.PhaseWarmup)
	pr, err := e.warmUp(ctx, cl)
	if pr != nil {
		defer pr.Close()
	}
	if err != nil {
		return verdict, err
	}
	return e.measure(ctx, pr)
}

// startCluster opens the run's cluster (Config.Cluster).
func (e *Experiment) startCluster(ctx context.Context) (Cluster, error) {
	cl, err := e.cfg.Cluster.Open(ctx, OpenEnv{
		OutDir: e.cfg.OutDir, TimeScale: e.cfg.TimeScale,
		OnLog: e.onLog, OnChange: e.onChange,
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.cluster = cl
	e.mu.Unlock()
	return cl, nil
}

// stopCluster is Run's deferred end: resume, TERM, KILL after the grace,
// reap; then the last engine states and the end event with the run's exit
// code. A panic in Run becomes its error.
func (e *Experiment) stopCluster(cl Cluster, verdict *event.Verdict, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("internal error: %v\n%s", r, debug.Stack())
	}
	if stopErr := cl.Stop(context.Background()); stopErr != nil && *err == nil {
		*err = fmt.Errorf("stop the cluster: %w", stopErr)
	}
	e.emitEngines()
	endErr := *err
	if endErr == nil && !verdict.Passed {
		endErr = check.Outcome(*verdict) // the end event carries the run's exit code
	}
	e.emitEnd(endErr)
}

// warmUp handshakes every source's session; the prober it returns (also
// on error, when one was made) must be closed.
func (e *Experiment) warmUp(ctx context.Context, cl Cluster) (*probe.Prober, error) {
	pr, err := probe.New(e.probeConfig(cl))
	if err != nil {
		return nil, exitcode.AsUsage(err)
	}
	e.mu.Lock()
	e.prober = pr
	e.mu.Unlock()
	e.emitAddresses(pr)
	if err := pr.Warmup(ctx, e.cfg.WarmupTimeout); err != nil {
		if ctx.Err() != nil {
			return pr, interrupted(ctx)
		}
		return pr, e.notEngaged(ctx, cl, err)
	}
	return pr, nil
}

// measure is the measured run from t0: the probe, its sample batches and
// the timeline, until the timeline settles, the planned duration passes or
// ctx ends; then the final verdict.
func (e *Experiment) measure(ctx context.Context, pr *probe.Prober) (event.Verdict, error) {
	// Every arm of the run starts measuring at one t0, so one timeline
	// fires on all of them at the same instants.
	e.mu.Lock()
	e.lined = true
	e.mu.Unlock()
	t0, err := e.line.arrive(ctx)
	if err != nil {
		return event.Verdict{}, interrupted(ctx)
	}
	e.mu.Lock()
	e.t0 = t0
	e.mu.Unlock()
	e.setPhase(event.PhaseBaseline)

	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	drained := e.startProbe(probeCtx, pr, t0)
	playCtx, stopPlay := context.WithCancel(ctx)
	defer stopPlay()
	go e.safely(func() { e.play(playCtx, t0) })

	var runErr error
	select {
	case <-e.settled:
	case <-e.durationElapsed(t0):
	case <-ctx.Done():
		runErr = interrupted(ctx)
		pr.Abort() // do not wait out hung pulls when the user quits
	}
	runEnd := time.Since(t0)
	e.mu.Lock()
	e.judge.Stop(runEnd) // a pull sent while the probe stops is not judged
	e.mu.Unlock()
	stopPlay() // no fault fires once the run is over (a nemesis' end is its duration)
	// Done is when the probe stopped sending, the end of the judged time,
	// before the pulls in flight drain: `p2pfault report` reads the run's
	// end from it.
	e.setPhase(event.PhaseDone)
	stopProbe()
	<-drained

	final := e.verdictAt(runEnd, true)
	e.emit(event.Event{Kind: event.KindVerdict, Verdict: &final, Final: true})
	if runErr == nil {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			runErr = c // a goroutine failed (panic, restart that never came up)
		}
	}
	return final, runErr
}

// startProbe runs the probe until ctx ends, keeps its samples and sends
// them in batches; the channel closes once every sample is sent.
func (e *Experiment) startProbe(ctx context.Context, pr *probe.Prober, t0 time.Time) <-chan struct{} {
	out := make(chan event.Sample, 1024)
	probeDone := make(chan struct{})
	go e.safely(func() { defer close(probeDone); pr.Run(ctx, t0, out) })
	collected := make(chan struct{})
	go e.safely(func() { defer close(collected); e.collect(out, probeDone) })
	flushDone := make(chan struct{})
	go e.safely(func() { defer close(flushDone); e.flushLoop(collected) })
	return flushDone
}

// finish ends a run that never got its cluster up.
func (e *Experiment) finish(v event.Verdict, err error) (event.Verdict, error) {
	e.emitEnd(err)
	return v, err
}

func startError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	if exitcode.Code(err) == exitcode.Usage {
		return err
	}
	return exitcode.AsUsage(err)
}

func interrupted(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return exitcode.ErrInterrupted
}

// safely runs fn, turning a panic into the run's failure, so the deferred
// cleanup in Run still stops every engine.
func (e *Experiment) safely(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			e.fail(fmt.Errorf("internal error: %v\n%s", r, debug.Stack()))
		}
	}()
	fn()
}

func (e *Experiment) probeConfig(cl Cluster) probe.Config {
	var srcs []probe.Source
	for _, s := range cl.Sources() {
		srcs = append(srcs, probeSource(s))
	}
	return probe.Config{
		DecoderURL:   cl.Decoder().HTTPURL(),
		Sources:      srcs,
		Model:        e.plan.Model,
		Interval:     e.cfg.scale(e.cfg.Interval),
		PromptTokens: e.cfg.PromptTokens,
		SeedTimeout:  e.cfg.scale(e.cfg.SeedTimeout),
		PullTimeout:  e.cfg.scale(e.cfg.PullTimeout),
		Stream:       e.cfg.Stream,
		// Seed and pull ask for the same greedy completion, whose texts
		// the samples compare (check content_matches).
		ContentTokens: e.cfg.ContentTokens,
		Mode:          e.cfg.Mode,
		Network:       networkOf(cl),
		Warn:          func(msg string) { e.emit(event.Event{Kind: event.KindWarning, Message: msg}) },
		// Each pull is told when it is sent, batched with the samples, so
		// a face sees pulls that hang (a stalled source's) before they end.
		Started: func(p event.PullStart) {
			e.mu.Lock()
			e.starts = append(e.starts, p)
			e.judge.Started(p)
			e.mu.Unlock()
		},
	}
}

// durationElapsed fires when a case-none or nemesis run has run its
// Duration; never for scripted runs (they end when the timeline settles)
// or the dashboard.
func (e *Experiment) durationElapsed(t0 time.Time) <-chan time.Time {
	if len(e.timeline) > 0 && e.cfg.Nemesis == nil || e.cfg.Duration == 0 {
		return nil
	}
	return time.After(time.Until(t0.Add(e.cfg.scale(e.cfg.Duration))))
}

// collect gives every sample to the judge and queues it for the next
// batch event, until the probe is done and out is drained.
func (e *Experiment) collect(out <-chan event.Sample, probeDone <-chan struct{}) {
	keep := func(s event.Sample) {
		e.mu.Lock()
		e.judge.Ended(s)
		e.pending = append(e.pending, s)
		e.mu.Unlock()
	}
	for {
		select {
		case s := <-out:
			keep(s)
		case <-probeDone:
			// Run has returned: nothing more is sent, take what is queued.
			for {
				select {
				case s := <-out:
					keep(s)
				default:
					return
				}
			}
		}
	}
}

// flushLoop sends the queued samples as one event every 100 ms (faces
// redraw per batch, not per request) and the live verdict once a second,
// and at once when a pull in flight has just broken a bound
// (check.Crossed): a check never shows green for a second after a hanging
// pull has failed it.
func (e *Experiment) flushLoop(done <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-tick.C:
			e.flushSamples(false)
			e.advance()
			if n++; n%10 == 0 || e.pendingCrossed() {
				e.emitLiveVerdict()
			}
		case <-done:
			e.flushSamples(true)
			return
		}
	}
}

func (e *Experiment) flushSamples(final bool) {
	now := e.since()
	e.mu.Lock()
	batch, starts := e.pending, e.starts
	batch, e.pending = e.attribute(batch, now, final)
	e.starts = nil
	e.mu.Unlock()
	// Starts go first: a pull that started and ended within one batch is
	// then seen to start before it ends.
	if len(starts) > 0 {
		e.emit(event.Event{Kind: event.KindPullStart, Pulls: starts})
	}
	if len(batch) > 0 {
		e.emit(event.Event{Kind: event.KindSamples, Samples: batch})
	}
}

// advance lets the judge judge the pulls it can and sends the verdict of
// every window that settled.
func (e *Experiment) advance() {
	now := e.since()
	e.mu.Lock()
	e.judge.Advance(now)
	settled := e.judge.Settled()
	e.mu.Unlock()
	for i := range settled {
		e.emit(event.Event{Kind: event.KindWindowVerdict, WindowVerdict: &settled[i]})
	}
}

// pendingCrossed reports whether a pull in flight broke a bound of a
// window not settled yet since the last live verdict.
func (e *Experiment) pendingCrossed() bool {
	now := e.since()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.judge.Crossed(e.judgedAt, now)
}

func (e *Experiment) emitLiveVerdict() {
	e.mu.Lock()
	has := len(e.windows) > 0
	e.mu.Unlock()
	if !has {
		return
	}
	v := e.verdictAt(e.since(), false)
	e.emit(event.Event{Kind: event.KindVerdict, Verdict: &v})
}

// verdictAt is the judge's verdict on the run so far (judged to runEnd)
// and the pulls in flight now: every fault window on its own, the run on
// the window check.Judged picks when it had one (the scripted fault's, or
// on the dashboard the latest fault's) or on all of them. The final
// verdict also carries each source's steady-state summary and every
// window; a live one the windows not settled yet.
func (e *Experiment) verdictAt(runEnd time.Duration, final bool) event.Verdict {
	now := e.since()
	e.mu.Lock()
	e.judgedAt = now
	v, ok := e.judge.Verdict(max(now, runEnd), runEnd, final)
	e.mu.Unlock()
	if !ok {
		v = e.noWindowVerdict(v, runEnd)
	}
	return v
}

// noWindowVerdict is the judge's verdict v of a run no fault window opened
// in, as the run gives it: without the judge's all_200 (a report rebuilt
// from the events keeps it), and for a scripted run failing fault_window
// first.
func (e *Experiment) noWindowVerdict(v event.Verdict, runEnd time.Duration) event.Verdict {
	var checks []event.Result
	if len(e.timeline) > 0 {
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

// rel is at as a time since t0 (0 before warm-up ends).
func (e *Experiment) rel(at time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t0.IsZero() || at.IsZero() {
		return 0
	}
	return at.Sub(e.t0)
}

// since is the time since t0 (0 before warm-up ends).
func (e *Experiment) since() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t0.IsZero() {
		return 0
	}
	return time.Since(e.t0)
}

// emit stamps ev (sequence, time, arm: the envelope every event carries)
// and hands it to every subscriber, in order.
func (e *Experiment) emit(ev event.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev.Arm = e.cfg.Arm
	if ev.Kind == event.KindMetrics && e.t0.IsZero() {
		e.noteWarmReading(ev.Metrics)
	}
	e.bus.publish(ev, e.t0) // the bus stamps sequence and time: one order for every arm
}

// closeSubs ends this arm's part of the stream; the bus closes it once
// every arm sharing it has ended.
func (e *Experiment) closeSubs() { e.bus.leave() }

// leaveLine lets the other arms start measuring when this one never will
// (its cluster did not start, its warm-up failed).
func (e *Experiment) leaveLine() {
	e.mu.Lock()
	lined := e.lined
	e.lined = true
	e.mu.Unlock()
	if !lined {
		e.line.leave()
	}
}

func (e *Experiment) emitEnd(err error) {
	ev := event.Event{Kind: event.KindEnd, ExitCode: exitcode.Code(err), Message: "run complete"}
	if err != nil {
		ev.Message = err.Error()
	}
	e.emit(ev)
}

func (e *Experiment) setPhase(p event.Phase) {
	e.mu.Lock()
	same := e.phase == p
	e.phase = p
	e.mu.Unlock()
	if !same {
		e.emit(event.Event{Kind: event.KindPhase, Phase: p})
	}
}

// interesting are the engine log phrases worth an event: faults as the
// engines saw them (the sim's wording, and vLLM's where it differs).
var interesting = []string{
	"engine ready", "connected", " down", "timed out", "stale connection",
	"resumed after", "hash seed mismatch", "fingerprint mismatch", "ERROR", "Traceback",
}

func (e *Experiment) onLog(engine, line string) {
	e.noteLine(engine, line)
	for _, k := range interesting {
		if strings.Contains(line, k) {
			e.emit(event.Event{Kind: event.KindLog, Log: &event.LogLine{Engine: engine, Line: line}})
			return
		}
	}
}

// LogTail returns the last n lines engine printed.
func (e *Experiment) LogTail(engine string, n int) []string {
	e.mu.Lock()
	cl := e.cluster
	e.mu.Unlock()
	if cl == nil {
		return nil
	}
	for _, t := range targets(cl) {
		if t.Name() == engine {
			return t.LogTail(n)
		}
	}
	return nil
}

// SetProbing pauses or resumes the probe.
func (e *Experiment) SetProbing(on bool) {
	e.mu.Lock()
	pr := e.prober
	e.mu.Unlock()
	if pr != nil {
		pr.SetPaused(!on)
	}
}

// onChange sends the changed engine's state: one engine's, read once,
// and a source's condition when it changed with it.
func (e *Experiment) onChange(in event.EngineInfo) {
	e.mu.Lock()
	cl := e.cluster
	e.mu.Unlock()
	if cl == nil {
		return // still starting: Run sends every state once Start returns
	}
	for _, t := range targets(cl) {
		if t.Name() == in.Name {
			e.sendState(t)
			return
		}
	}
}

// emitEngines sends every engine's state as it is now, and every source's
// condition that changed.
func (e *Experiment) emitEngines() {
	e.mu.Lock()
	cl := e.cluster
	e.mu.Unlock()
	if cl == nil {
		return
	}
	for _, t := range targets(cl) {
		e.sendState(t)
	}
}

// sendState sends t's state, read once, and for a source its condition.
func (e *Experiment) sendState(t Target) {
	st := t.State()
	e.emit(event.Event{Kind: event.KindEngine, Engine: &st})
	if t.Role() == event.RoleSource {
		e.observe(t.Index(), st)
	}
}
