package ui

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/fault"
)

// fakeCtrl records what the dashboard asks of the experiment, and
// refuses as the run's one check does: by fault's rule over each source's
// last condition in the events it saw (see).
type fakeCtrl struct {
	mu      sync.Mutex
	arms    []string                           // in the order seen
	conds   map[string]map[int]event.Condition // arm -> source -> condition
	calls   []string
	called  chan string
	err     error
	logs    map[string][]string
	probing []bool
}

func newFakeCtrl() *fakeCtrl {
	return &fakeCtrl{called: make(chan string, 64), logs: map[string][]string{}}
}

func (f *fakeCtrl) record(call string) error {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	err := f.err
	f.mu.Unlock()
	select {
	case f.called <- call:
	default:
	}
	return err
}

// see keeps each source's last condition from evs, per arm.
func (f *fakeCtrl) see(evs ...event.Event) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range evs {
		if ev.Kind == event.KindRun && !slices.Contains(f.arms, ev.Arm) {
			f.arms = append(f.arms, ev.Arm)
		}
		if ev.Kind != event.KindCondition {
			continue
		}
		if f.conds == nil {
			f.conds = map[string]map[int]event.Condition{}
		}
		if f.conds[ev.Arm] == nil {
			f.conds[ev.Arm] = map[int]event.Condition{}
		}
		f.conds[ev.Arm][ev.Condition.Source] = ev.Condition.Condition
	}
}

// tee hands every event of events to f (see) and on to the channel it
// returns, closed when events is.
func (f *fakeCtrl) tee(events <-chan event.Event) <-chan event.Event {
	out := make(chan event.Event, cap(events))
	go func() {
		defer close(out)
		for ev := range events {
			f.see(ev)
			out <- ev
		}
	}()
	return out
}

// refusal is the rule's answer for a on arm: a *fault.Refused, Arm set in
// a run of several, or nil.
func (f *fakeCtrl) refusal(arm string, a fault.Action) error {
	f.mu.Lock()
	c, seen := f.conds[arm][a.Source]
	multi := len(f.arms) > 1
	f.mu.Unlock()
	r := &fault.Refused{}
	if multi {
		r.Arm = arm
	}
	if a.OnRank {
		if r.Err = a.Kind.RankRefusal(); r.Err != nil {
			return r
		}
	}
	if why := a.Kind.Refusal(event.SourceName(a.Source), c); seen && why != "" {
		r.Err = errors.New(why)
		return r
	}
	return nil
}

func (f *fakeCtrl) Fire(a fault.Action) error {
	f.mu.Lock()
	arms := append([]string(nil), f.arms...)
	f.mu.Unlock()
	if len(arms) == 0 {
		arms = []string{""}
	}
	var refused []error
	for _, arm := range arms {
		if err := f.refusal(arm, a); err != nil {
			refused = append(refused, err)
		}
	}
	if len(refused) > 0 {
		return errors.Join(refused...)
	}
	if a.OnRank {
		return f.record(fmt.Sprintf("%s %d/rank%d", a.Kind.Name, a.Source, a.Rank))
	}
	return f.record(fmt.Sprintf("%s %d", a.Kind.Name, a.Source))
}
func (f *fakeCtrl) SetProbing(on bool) {
	f.mu.Lock()
	f.probing = append(f.probing, on)
	f.mu.Unlock()
	_ = f.record(fmt.Sprintf("probing %v", on))
}

func (f *fakeCtrl) LogTail(engine string, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[engine]
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return append([]string(nil), l...)
}

func (f *fakeCtrl) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// asciiRenderer pins the colour profile so views are the same bytes on
// every machine.
func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

// started is the wall time the synthetic runs start; t0 (end of warm-up)
// is 20 s later.
func started() time.Time { return time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC) }

const warmup = 20 * time.Second

// wallAt is the wall time of run time t.
func wallAt(t time.Duration) time.Time { return started().Add(warmup + t) }

// script builds a synthetic event stream.
type script struct {
	events []event.Event
	trial  int64
}

func (s *script) add(t time.Duration, ev event.Event) {
	ev.Seq = int64(len(s.events) + 1)
	ev.T, ev.Wall = t, wallAt(t)
	s.events = append(s.events, ev)
}

func runInfo(faultCase string, sources int, scale float64) *event.RunInfo {
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	return &event.RunInfo{
		Arm: "main", Case: faultCase, Engine: "sim", TimeScale: scale, Sources: sources,
		Interval: sc(500 * time.Millisecond), FaultAt: sc(10 * time.Second), FaultFor: sc(30 * time.Second),
		Duration: sc(60 * time.Second), Bounds: check.DefaultBounds().Scaled(scale),
		Model: "meta-llama/Llama-3.2-1B-Instruct", Started: started(),
	}
}

// run starts the stream as the experiment does: the run event, its
// schedule when it has one (the header counts down to it), the starting
// phase.
func (s *script) run(info *event.RunInfo) {
	s.add(-warmup, event.Event{Kind: event.KindRun, Run: info})
	if sched := scheduleOf(info); sched != nil {
		s.add(-warmup, event.Event{Kind: event.KindSchedule, Schedule: sched})
	}
	s.add(-warmup, event.Event{Kind: event.KindPhase, Phase: event.PhaseStarting})
}

// scheduleOf is the schedule event the experiment sends for info: its
// timeline's steps (scaled), or its case's preset; nil without a fault.
func scheduleOf(info *event.RunInfo) *event.ScheduleInfo {
	tl, err := fault.Preset(info.Case, info.FaultAt, info.FaultFor)
	if info.Timeline != "" {
		tl, err = fault.Parse(info.Timeline)
	}
	if err != nil || len(tl) == 0 || info.FaultAt <= 0 {
		return nil
	}
	scale := info.TimeScale
	if info.Timeline == "" || scale <= 0 {
		scale = 1 // a preset is built at the run's (scaled) fault time
	}
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	si := &event.ScheduleInfo{Timeline: info.Timeline}
	for _, st := range tl {
		si.Steps = append(si.Steps, event.ScheduledFault{At: sc(st.At), Action: st.Kind.Name, Arg: st.Arg, Source: st.Source, For: sc(st.For)})
	}
	return si
}

func engineInfo(name string, index int, state event.State, pid int, up time.Duration) *event.EngineInfo {
	role, http, p2p := event.RoleSource, 8100+index, 7777+index
	if name == "decoder" {
		role, http, p2p = event.RoleDecoder, 8200, 7779
	}
	return &event.EngineInfo{
		Name: name, Role: role, Index: index, State: state, Pid: pid, Sid: pid,
		Members: []int{pid, pid + 3}, HTTPPort: http, P2PPort: p2p, Uptime: up,
	}
}

func (s *script) engine(t time.Duration, info *event.EngineInfo) {
	s.add(t, event.Event{Kind: event.KindEngine, Engine: info})
}

// upCluster brings two sources and the decoder up and reaches t0.
func (s *script) upCluster(sources int) {
	for i := 0; i < sources; i++ {
		s.engine(-19*time.Second, engineInfo(event.SourceName(i), i, event.StateStarting, 4200+10*i, 0))
	}
	s.engine(-19*time.Second, engineInfo("decoder", 0, event.StateStarting, 4300, 0))
	for i := 0; i < sources; i++ {
		s.engine(-16*time.Second, engineInfo(event.SourceName(i), i, event.StateReady, 4200+10*i, 3*time.Second))
	}
	s.engine(-15*time.Second, engineInfo("decoder", 0, event.StateReady, 4300, 4*time.Second))
	for i := 0; i < sources; i++ {
		s.cond(-15*time.Second, event.ConditionInfo{Source: i, Condition: event.CondUp, Label: "READY"})
	}
	s.add(-14*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseWarmup})
	s.add(0, event.Event{Kind: event.KindPhase, Phase: event.PhaseBaseline})
}

// latencyFn gives a pull's latency and whether it hit, by source and start.
type latencyFn func(source int, start time.Duration, trial int64) (time.Duration, bool)

func healthy(_ int, _ time.Duration, trial int64) (time.Duration, bool) {
	return time.Duration(10+(trial*7)%25) * time.Millisecond, true
}

// samples adds pulls every interval on each source from `from` to `to`,
// sent in one KindSamples event per second of run time as they end.
func (s *script) samples(sources int, from, to, interval time.Duration, lat latencyFn) {
	var pending []event.Sample
	flushAt := from + time.Second
	for t := from; t < to; t += interval {
		for i := 0; i < sources; i++ {
			s.trial++
			l, hit := lat(i, t, s.trial)
			cached := 0
			if hit {
				cached = 256
			}
			pending = append(pending, event.Sample{
				Source: i, Trial: s.trial, SeedStatus: 200, SeedLatency: 5 * time.Millisecond,
				Start: t, Latency: l, Status: 200, PromptTokens: 300, CachedTokens: cached,
			})
		}
		if t+interval >= flushAt {
			s.flush(&pending, flushAt)
			flushAt += time.Second
		}
	}
	s.flush(&pending, to)
}

// flush sends the pending samples that ended by t.
func (s *script) flush(pending *[]event.Sample, t time.Duration) {
	var done, rest []event.Sample
	for _, p := range *pending {
		if p.End() <= t {
			done = append(done, p)
		} else {
			rest = append(rest, p)
		}
	}
	*pending = rest
	if len(done) > 0 {
		s.add(t, event.Event{Kind: event.KindSamples, Samples: done})
	}
}

func (s *script) fault(t time.Duration, action string, source int, d time.Duration) {
	s.add(t, event.Event{Kind: event.KindFault, Fault: &event.FaultInfo{Action: action, Source: source, Duration: d, By: "script"}})
}

// cond is a source's condition as the experiment sends it.
func (s *script) cond(t time.Duration, c event.ConditionInfo) {
	s.add(t, event.Event{Kind: event.KindCondition, Condition: &c})
}

func (s *script) window(t time.Duration, w event.Window) {
	s.add(t, event.Event{Kind: event.KindWindow, Window: &w})
}

func (s *script) log(t time.Duration, engine, line string) {
	s.add(t, event.Event{Kind: event.KindLog, Log: &event.LogLine{Engine: engine, Line: line}})
}

func (s *script) verdict(t time.Duration, v event.Verdict, final bool) {
	s.add(t, event.Event{Kind: event.KindVerdict, Verdict: &v, Final: final})
}

func liveVerdict(faultedMax bool) event.Verdict {
	res := func(name string, ok bool, detail string) event.Result {
		return event.Result{Name: name, Passed: ok, Detail: detail}
	}
	v := event.Verdict{Passed: faultedMax, Checks: []event.Result{
		res(check.NameAll200, true, "every decoder request returned 200"),
		res(check.NameFaultedBound, faultedMax, "a request naming the faulted source took 30.0s (bound 15.0s)"),
		res(check.NameFaultedMedian, false, "median 16.85s from fault + 2.0s on (bound 2.0s)"),
		res(check.NameHealthy, true, "60/60 healthy pulls hit, max 0.07s"),
		{Name: check.NameRecovery, Passed: true, Detail: "no pull in the recovery window yet", Empty: true},
	}}
	if faultedMax {
		v.Checks[1].Detail = "max 0.05s (bound 15.0s)"
		v.Checks[2].Passed, v.Checks[2].Detail = true, "median 0.01s (bound 2.0s)"
	}
	v.Summary = event.Summary{
		Faulted:  event.Stats{N: 54, Pulled: 0, P50: 16850 * time.Millisecond, Max: 30040 * time.Millisecond},
		Healthy:  event.Stats{N: 60, Pulled: 60, Max: 70 * time.Millisecond},
		Recovery: event.Stats{N: 51, Pulled: 43},
	}
	return v
}

// scene is a synthetic run stopped at now (run time).
type scene struct {
	events []event.Event
	now    time.Duration
	ctrl   *fakeCtrl
}

func sceneStartup() scene {
	var s script
	s.run(runInfo("stall", 2, 1))
	s.engine(-19*time.Second, engineInfo("source-0", 0, event.StateStarting, 4200, 0))
	s.engine(-19*time.Second, engineInfo("source-1", 1, event.StateStarting, 4210, 0))
	s.engine(-16*time.Second, engineInfo("source-0", 0, event.StateReady, 4200, 3*time.Second))
	s.log(-16*time.Second, "source-0", "INFO: Application startup complete.")
	return scene{events: s.events, now: -15 * time.Second, ctrl: newFakeCtrl()}
}

func sceneStartupFailed() scene {
	var s script
	s.run(runInfo("stall", 2, 1))
	s.engine(-19*time.Second, engineInfo("source-0", 0, event.StateStarting, 4200, 0))
	s.engine(-19*time.Second, engineInfo("source-1", 1, event.StateStarting, 4210, 0))
	s.engine(-18*time.Second, engineInfo("source-0", 0, event.StateReady, 4200, time.Second))
	exited := engineInfo("source-1", 1, event.StateExited, 4210, 2*time.Second)
	exited.Exit = "code 1"
	s.engine(-17*time.Second, exited)
	s.add(-17*time.Second, event.Event{Kind: event.KindWarning, Message: "source-1 exited before it was ready (code 1)"})
	s.add(-16*time.Second, event.Event{Kind: event.KindEnd, Message: "start source-1 on :8101: port in use by pid 999", ExitCode: 2})
	ctrl := newFakeCtrl()
	ctrl.logs["source-1"] = []string{
		"INFO: Started server process [4210]",
		"ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', 8101): address already in use",
		"INFO: Waiting for application shutdown.",
	}
	return scene{events: s.events, now: -16 * time.Second, ctrl: ctrl}
}

func sceneSteady() scene {
	var s script
	s.run(runInfo("stall", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, 8*time.Second, 500*time.Millisecond, healthy)
	return scene{events: s.events, now: 8 * time.Second, ctrl: newFakeCtrl()}
}

// sceneTimeline is `run --timeline "at 10s kill source-1; at 30s stall
// source-0 for 5s"` before its first fault: the header names that fault
// (kill source-1), not the case.
func sceneTimeline() scene {
	var s script
	info := runInfo("none", 2, 1)
	info.Timeline = "at 10s kill source-1; at 30s stall source-0 for 5s"
	s.run(info)
	s.upCluster(2)
	s.samples(2, 0, 6*time.Second, 500*time.Millisecond, healthy)
	return scene{events: s.events, now: 6 * time.Second, ctrl: newFakeCtrl()}
}

// stalledAt10s is a stall run up to its fault: two sources hitting for
// 10 s, then source-0 stalled for 30 s and its window open.
func stalledAt10s() *script {
	var s script
	s.run(runInfo("stall", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, 10*time.Second, 500*time.Millisecond, healthy)
	s.fault(10*time.Second, fault.ActionStall, 0, 30*time.Second)
	s.cond(10*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondStalled, Fault: fault.ActionStall, Label: "STALLED", Until: 40 * time.Second})
	s.window(10*time.Second, event.Window{Source: 0, Start: 10 * time.Second, Recovers: true})
	return &s
}

func sceneStalled() scene {
	s := stalledAt10s()
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	s.engine(10100*time.Millisecond, engineInfo("source-0", 0, event.StateStopped, 4200, 29*time.Second))
	// Pulls naming the stalled source hang, then give up on the lookup
	// deadline; the healthy source keeps hitting.
	s.samples(2, 10*time.Second, 22*time.Second, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		if i == 0 {
			return 8*time.Second - (start-10*time.Second)/4, false
		}
		return healthy(i, start, trial)
	})
	s.log(20*time.Second, "decoder", "P2P 9f1c: peer 127.0.0.1:7777 down")
	s.verdict(22*time.Second, liveVerdict(true), false)
	return scene{events: s.events, now: 22 * time.Second, ctrl: newFakeCtrl()}
}

func sceneKilled(restarting bool) scene {
	var s script
	s.run(runInfo("kill", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, 10*time.Second, 500*time.Millisecond, healthy)
	s.fault(10*time.Second, fault.ActionKill, 0, 0)
	s.cond(10*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondRestarting, Fault: fault.ActionKill, Label: "KILLED", Down: true})
	s.window(10*time.Second, event.Window{Source: 0, Start: 10 * time.Second, Recovers: true})
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	exited := engineInfo("source-0", 0, event.StateExited, 4200, 29*time.Second)
	exited.Exit = "signal killed"
	s.engine(10050*time.Millisecond, exited)
	s.log(10060*time.Millisecond, "decoder", "P2P 77aa: peer 127.0.0.1:7777 down")
	now := 10500 * time.Millisecond
	if restarting {
		re := engineInfo("source-0", 0, event.StateRestarting, 4400, 0)
		re.Restarts = 1
		s.engine(10200*time.Millisecond, re)
		s.cond(10200*time.Millisecond, event.ConditionInfo{Source: 0, Condition: event.CondRestarting, Fault: fault.ActionKill, Label: "RESTARTING"})
		now = 12 * time.Second
	}
	s.samples(2, 10*time.Second, now, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		if i == 0 {
			return 20 * time.Millisecond, false
		}
		return healthy(i, start, trial)
	})
	return scene{events: s.events, now: now, ctrl: newFakeCtrl()}
}

func sceneRemoved() scene {
	var s script
	s.run(runInfo("remove", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, 10*time.Second, 500*time.Millisecond, healthy)
	s.fault(10*time.Second, fault.ActionRemove, 0, 0)
	s.cond(10*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondRemoved, Fault: fault.ActionRemove, Label: "REMOVED"})
	s.window(10*time.Second, event.Window{Source: 0, Start: 10 * time.Second})
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	s.engine(10300*time.Millisecond, engineInfo("source-0", 0, event.StateRemoved, 4200, 29*time.Second))
	s.samples(2, 10*time.Second, 20*time.Second, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		if i == 0 {
			return 15 * time.Millisecond, false
		}
		return healthy(i, start, trial)
	})
	return scene{events: s.events, now: 20 * time.Second, ctrl: newFakeCtrl()}
}

func sceneFailedChecks() scene {
	s := stalledAt10s()
	s.samples(2, 10*time.Second, 40*time.Second, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		if i == 0 {
			return 30*time.Second - (start - 10*time.Second), false
		}
		return healthy(i, start, trial)
	})
	s.fault(40*time.Second, fault.ActionResume, 0, 0)
	s.cond(40*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondUp, Label: "READY"})
	s.window(40*time.Second, event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true})
	s.samples(2, 40*time.Second, 60*time.Second, 500*time.Millisecond, healthy)
	s.add(60*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseDone})
	s.verdict(60*time.Second, liveVerdict(false), true)
	s.add(60*time.Second, event.Event{Kind: event.KindEnd, Message: "a bound failed", ExitCode: 1})
	return scene{events: s.events, now: 61 * time.Second, ctrl: newFakeCtrl()}
}
