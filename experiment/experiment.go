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

	// The run in parts, each with its own lock (or none), none held
	// while an event is sent (bus): the run's course, the sample stream,
	// the verdicts, the faults, and the lines' evidence.
	run      *lifecycle
	stream   *stream
	verdicts *verdicts
	faults   *faults
	evidence *evidence

	settled chan struct{} // closed when the scripted timeline has played out
	begun   chan struct{} // closed once the run event is sent (a Group starts its arms in order)
	net     *network      // the run's firewall table, made on the first network fault
	links   *links        // the run's links (Config.Link), set once the cluster is open
	// faultsGoing are the faults' own goroutines (fault.Env.Go: a busy
	// load, a restart, a timed resume or heal), which end with the run's
	// context; the run waits for them before its end event (stopCluster).
	faultsGoing sync.WaitGroup
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
		if tl, err = cfg.nemesisSchedule(plan.Sources, plan.Decoders); err != nil {
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
	if err := tl.CheckDecoders(max(plan.Decoders, 1)); err != nil {
		return nil, err
	}
	// A link kind acts on the run's links: using one asks for them (but
	// for what a cluster that shapes its packets takes itself).
	if cfg.Link && plan.ShapesLinks {
		return nil, exitcode.Usagef("--link: p2pfault's links cannot run in this cluster, which shapes its packets itself (on --kube, latency and bandwidth are Chaos Mesh NetworkChaos): drop --link")
	}
	cfg.Link = cfg.Link || tl.NeedsLinks(plan.ShapesLinks)
	if cfg.Link && plan.NoLinks != "" {
		return nil, exitcode.Usagef("--link (or a link fault in the case or timeline): %s", plan.NoLinks)
	}
	if tl.HasPair() && !plan.OwnNetwork {
		return nil, exitcode.AsUsage(fmt.Errorf("timeline %q: %w", text, fault.ErrNoPairs))
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
		run:      &lifecycle{},
		stream:   &stream{},
		verdicts: &verdicts{judge: check.NewJudge(check.Setup{Bounds: cfg.Bounds.Scaled(cfg.TimeScale), Sources: plan.Sources, Ranks: plan.Ranks, Decoders: plan.Decoders,
			Scripted: len(tl) > 0, Content: cfg.ContentMatch}), keep: plan.Decoders > 1 || tl.OnDecoder()},
		faults:  newFaults(),
		bus:     newBus(1),
		line:    newStartLine(1),
		settled: make(chan struct{}),
		begun:   make(chan struct{}),
		net:     &network{runID: newRunID(cfg.Arm, cfg.Case)},
	}
	e.evidence = e.newEvidence()
	e.verdicts.pullsEnd = e.pullsEndWithin()
	e.parkedSetup()
	return e, nil
}

// Subscribe returns a channel that receives every event of the run and is
// closed when the run ends (once it has been given every event). Call it
// before Run. Events are never dropped: a subscriber that stops reading
// gets them, in order, when it reads again, and holds up nothing else
// meanwhile (bus).
func (e *Experiment) Subscribe() <-chan event.Event { return e.bus.subscribe() }

// Info describes the run as planned.
func (e *Experiment) Info() event.RunInfo {
	c := e.cfg
	info := event.RunInfo{
		Arm: c.Arm, Case: c.Case, Mode: c.Mode, Engine: e.plan.Engine, TimeScale: c.TimeScale,
		Sources: e.plan.Sources, SourceRanks: e.plan.Ranks, Decoders: several(e.plan.Decoders), Interval: c.scale(c.Interval), Timeline: c.Timeline,
		Bounds: c.Bounds.Scaled(c.TimeScale), Model: e.plan.Model, Started: e.run.started(),
		FaultFor:      c.scale(c.FaultFor),
		ContentTokens: c.ContentTokens, ContentMatch: c.ContentMatch.String(),
		Settings: c.Settings, Link: c.Link,
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
	e.run.begin(ctx, fail)
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
	// The links close after the engines stop (deferred first), so no
	// engine sees its peer's link go before its peer.
	e.links = e.newLinks(cl)
	defer e.links.close()
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
	e.run.setCluster(cl)
	return cl, nil
}

// stopCluster is Run's deferred end: resume, TERM, KILL after the grace,
// reap; then the last engine states and the end event with the run's exit
// code. A panic in Run becomes its error.
func (e *Experiment) stopCluster(cl Cluster, verdict *event.Verdict, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("internal error: %v\n%s", r, debug.Stack())
	}
	e.endFaults()
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

// faultsGrace bounds how long the end waits for the faults' goroutines.
const faultsGrace = 10 * time.Second

// endFaults ends the run's context and waits for the faults' goroutines,
// so what they record last (a busy load's final report, a restart's
// outcome) is in the events before the end event, on every way out. One
// that does not return within faultsGrace is named in a warning and left.
func (e *Experiment) endFaults() {
	e.run.failWith(nil) // cancelled, not failed: the run's error is already decided
	done := make(chan struct{})
	go func() {
		e.faultsGoing.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(faultsGrace):
		e.emit(event.Event{Kind: event.KindWarning, Message: fmt.Sprintf(
			"a fault's goroutine had not returned %v after the run ended; its last record may be missing", faultsGrace)})
	}
}

// warmUp handshakes every source's session; the prober it returns (also
// on error, when one was made) must be closed.
func (e *Experiment) warmUp(ctx context.Context, cl Cluster) (*probe.Prober, error) {
	pr, err := probe.New(e.probeConfig(cl))
	if err != nil {
		return nil, exitcode.AsUsage(err)
	}
	e.run.setProber(pr)
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
	e.run.line()
	t0, err := e.line.arrive(ctx)
	if err != nil {
		return event.Verdict{}, interrupted(ctx)
	}
	e.run.setT0(t0)
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
	e.verdicts.stop(runEnd) // a pull sent while the probe stops is not judged
	stopPlay()              // no fault fires once the run is over (a nemesis' end is its duration)
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
			e.run.failWith(fmt.Errorf("internal error: %v\n%s", r, debug.Stack()))
		}
	}()
	fn()
}

func (e *Experiment) probeConfig(cl Cluster) probe.Config {
	var srcs []probe.Source
	for _, s := range cl.Sources() {
		srcs = append(srcs, probeSource(s))
	}
	var decs []string
	for _, d := range decodersOf(cl) {
		decs = append(decs, d.HTTPURL())
	}
	var via func(source, rank, decoder int, peer string) string
	if e.links != nil {
		via = e.links.via
	}
	return probe.Config{
		Via:          via,
		DecoderURLs:  decs,
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
		Hold:          e.cfg.ProbeHold,
		Warn:          func(msg string) { e.emit(event.Event{Kind: event.KindWarning, Message: msg}) },
		// Each pull is told when it is sent, batched with the samples, so
		// a face sees pulls that hang (a stalled source's) before they end.
		Started: func(p event.PullStart) {
			e.stream.started(p)
			e.verdicts.started(p)
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

// leaveLine lets the other arms start measuring when this one never will
// (its cluster did not start, its warm-up failed).
func (e *Experiment) leaveLine() {
	if !e.run.line() {
		e.line.leave()
	}
}

func (e *Experiment) setPhase(p event.Phase) {
	if e.run.setPhase(p) {
		e.emit(event.Event{Kind: event.KindPhase, Phase: p})
	}
}

// interesting are the engine log phrases worth an event: faults as the
// engines saw them (the sim's wording, and vLLM's where it differs).
var interesting = []string{
	"engine ready", "connected", " down", "timed out", "stale connection",
	"resumed after", "hash seed mismatch", "fingerprint mismatch", "ERROR", "Traceback",
	"pod event", // a Kubernetes cluster's (kube.EventPrefix)
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
	cl := e.run.cluster()
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
	pr := e.run.prober()
	if pr != nil {
		pr.SetPaused(!on)
	}
}

// onChange sends the changed engine's state: one engine's, read once,
// and a source's condition when it changed with it.
func (e *Experiment) onChange(in event.EngineInfo) {
	cl := e.run.cluster()
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
	cl := e.run.cluster()
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
