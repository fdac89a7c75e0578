package experiment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/verify"
)

// faults is the run's record of what the fault kinds did to each source:
// the fault in force, the condition last sent, the open fault's handle,
// and the verification of the last action still going. Its lock guards
// these maps only and is never held across a call out of the type or a
// send.
type faults struct {
	mu        sync.Mutex
	inForce   map[int]inForce             // source index -> the fault in force (stalled, restarting, removed, ...)
	conds     map[int]event.ConditionInfo // source index -> its condition as last sent (condition.go)
	held      map[int]any                 // source index -> the open fault's handle (a stall to resume)
	verifying map[int]chan struct{}       // source index -> closed when the last action's verification is done
}

func newFaults() *faults {
	return &faults{inForce: map[int]inForce{}, conds: map[int]event.ConditionInfo{}, held: map[int]any{}, verifying: map[int]chan struct{}{}}
}

// Who fired a fault.
const (
	byScript = "script"
	byKey    = "key"
)

// play fires the scripted timeline's steps at their times (fault's one
// player), then waits for the run's end: recovery after each closed
// window, FaultFor after a removal. It closes e.settled when the run
// should end; a step that fails fails the run. A nemesis' schedule is
// played the same way, each step once there is room for it (awaitRoom);
// its run ends at its duration. ctx ends when the run does.
func (e *Experiment) play(ctx context.Context, t0 time.Time) {
	if len(e.timeline) == 0 {
		return
	}
	err := e.timeline.Play(ctx, t0, func(ctx context.Context, s fault.Step) error {
		e.awaitRoom(ctx, s)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err := e.fire(s.Action, byScript)
		if errors.Is(err, fault.ErrNotTaken) && e.run.context().Err() == nil {
			// An action the cluster's own means could not take (an attach
			// file's kubectl or ssh that failed) is the cluster's failure,
			// not the run's: say so and go on; the checks judge what
			// happened.
			e.emit(event.Event{Kind: event.KindWarning, Message: fmt.Sprintf(
				"fault action failed: %s: %v (the run goes on; a fault that never fired leaves its window empty and fails %s)",
				s, err, NameFaultWindow)})
			return nil
		}
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			e.run.failWith(fmt.Errorf("scripted %w", err))
		}
		return
	}
	if e.cfg.Nemesis != nil {
		return
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if end, ok := e.scriptEnd(); ok && time.Since(t0) >= end {
			close(e.settled)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scriptEnd is when a scripted run ends, once every window it opened can
// tell: ok is false while a window that will close (a stall, a restart) is
// still open.
func (e *Experiment) scriptEnd() (time.Duration, bool) {
	end := e.plannedEnd()
	for _, w := range e.verdicts.allWindowsNow() {
		switch {
		case !w.Recovers:
			end = max(end, w.Start+e.cfg.scale(e.cfg.FaultFor))
		case w.End == 0:
			return 0, false
		default:
			end = max(end, w.End+e.cfg.scale(e.cfg.Recovery))
		}
	}
	return end, true
}

// Fire takes action a for the dashboard's keys. A refusal by the
// kind's rule comes back as a *fault.Refused, the key's answer, and is
// not recorded: the face shows it.
func (e *Experiment) Fire(a fault.Action) error {
	a = e.keyed(a)
	t, err := e.admit(a)
	return e.take(a, t, err, byKey)
}

// keyed is a key's action a as the run takes it: a kind that takes a
// duration and is given none lasts the run's stall length.
func (e *Experiment) keyed(a fault.Action) fault.Action {
	if a.Kind.TakesFor && a.For == 0 {
		a.For = e.cfg.scale(e.cfg.FaultFor)
	}
	return a
}

// fire takes action a for the script (or a nemesis draw): the one check
// (admit), then the kind's Act.
func (e *Experiment) fire(a fault.Action, by string) error {
	t, err := e.admit(a)
	return e.take(a, t, err, by)
}

// take acts with a on t, admitted, or records why it was not (err).
func (e *Experiment) take(a fault.Action, t fault.Target, err error, by string) error {
	if err != nil {
		return e.refused(a, by, err)
	}
	return e.act(a, t, by)
}

// admit is the run's one check of action a, asked once, wherever it came
// from (a key, a timeline line, a nemesis draw): whether it may act now,
// and the target it acts on. A refusal by the kind's rule (a rank it does
// not take; the source's condition, read now: fault.Kind.Refusal) is a
// *fault.Refused; what else stops it (its argument, the host's setup, a
// source or a rank the cluster does not have, what the target lacks:
// Kind.Can) is an error of its own. The kind came with the action, as the
// edge that made it found it: it is not looked up again.
func (e *Experiment) admit(a fault.Action) (fault.Target, error) {
	k, src := a.Kind, targetKey(a)
	if a.OnRank {
		if err := k.RankRefusal(); err != nil {
			return nil, &fault.Refused{Err: err}
		}
	}
	if why := e.refuse(src, k); why != "" {
		return nil, &fault.Refused{Err: errors.New(why)}
	}
	if k.Arg != nil {
		if err := k.Arg.Check(a.Arg); err != nil {
			return nil, fmt.Errorf("%s %q: %w", k.Name, a.Arg, err)
		}
	}
	if needsSetup(k, e.plan) {
		if err := k.Setup(); err != nil {
			return nil, err
		}
	}
	st, err := e.source(actedOn(a))
	if err != nil {
		return nil, err
	}
	if a.Pair {
		if _, err := e.source(src); err != nil {
			return nil, err
		}
	}
	t, err := actTarget(st, a)
	if err != nil {
		return nil, err
	}
	if k.Can != nil {
		if err := k.Can(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// act lets a's kind act on t, admitted, through a firing (the run's
// bookkeeping for that source), and verifies it in the background.
func (e *Experiment) act(a fault.Action, t fault.Target, by string) error {
	k, src := a.Kind, targetKey(a)
	// The last action on src is verified before the next acts, or a resume
	// right after a stall would undo it before the stall was seen. The
	// check was asked before this wait, so an action the source refuses
	// is refused at once; what changes during it (a stall's timer ending)
	// the kind's Act meets itself (resume: no stall held).
	if done := e.pendingVerify(src); done != nil {
		e.awaitVerify(done)
	}
	env := &firing{e: e, src: src, target: rankName(a), kind: k, opts: a.Options, pairSrc: -1, rank: -1, decoder: -1}
	f := &fault.Fire{Kind: k, Target: t, Options: a.Options, By: by, Env: env, Verifier: e.verifier()}
	if a.OnRank {
		env.rank = a.Rank
	}
	if a.Pair {
		env.pairSrc, env.decoder = a.Source, a.Peer
		if d, err := e.source(src); err == nil {
			f.Peer = d.Name()
		}
	}
	if w := a.EngineWide(); w != "" {
		e.emit(event.Event{Kind: event.KindWarning, Message: w})
	}
	at := e.run.since()
	if err := k.Act(f); err != nil {
		return err
	}
	if k.Verify != nil {
		done := make(chan struct{})
		e.faults.verify(src, done)
		go e.safely(func() {
			defer close(done)
			e.verified(src, env.target, k.Name, at, k.Verify(f))
		})
	}
	return nil
}

// pendingVerify is the verification of the last action on src while it is
// still going (closed when it ends), nil when none is.
func (e *Experiment) pendingVerify(src int) <-chan struct{} {
	e.faults.mu.Lock()
	done := e.faults.verifying[src]
	e.faults.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
		return done
	}
}

// awaitVerify waits for a verification of the last action on a source
// (pendingVerify) to end: at most its deadline, 2 s; a kill's waits for the
// restart, which the next action on the source waits for anyway.
func (e *Experiment) awaitVerify(done <-chan struct{}) {
	select {
	case <-done:
	case <-e.run.context().Done():
	}
}

// verified records what the verification of an action taken at (since
// t0) on src saw: a verification event, and a warning when the effect was
// not seen within check.DefaultVerifyWithin. A skipped one (a target not
// on this host) records nothing.
func (e *Experiment) verified(src int, target, action string, at time.Duration, ef fault.Effect) {
	if ef.Skipped {
		return
	}
	v := event.Verification{Action: action, Source: src, Target: target, At: at, Verified: ef.OK, After: ef.After, Detail: ef.Detail}
	e.verdicts.verified(v)
	e.emit(event.Event{Kind: event.KindVerification, Verification: &v})
	if !ef.OK || ef.After > check.DefaultVerifyWithin {
		e.emit(event.Event{Kind: event.KindWarning, Message: fmt.Sprintf(
			"%s %s did not take effect within %s: %s", action, v.TargetName(), check.DefaultVerifyWithin, ef.Detail)})
	}
}

// setupKinds checks, before the run, that every kind the timeline uses can
// work on this host (a partition needs CAP_NET_ADMIN and nftables): a
// setup error, exit 2, naming what is missing.
func setupKinds(tl fault.Timeline, p Plan) error {
	seen := map[*fault.Kind]bool{}
	for _, s := range tl {
		k := s.Kind
		if !needsSetup(k, p) || seen[k] {
			continue
		}
		seen[k] = true
		if err := k.Setup(); err != nil {
			return exitcode.AsUsage(err)
		}
	}
	return nil
}

// needsSetup says whether k's Setup is asked on a cluster planned as p:
// a kind that checks the host's firewall is not, on a cluster that cuts
// its links itself.
func needsSetup(k *fault.Kind, p Plan) bool {
	return k.Setup != nil && !(k.HostFirewall && p.OwnNetwork)
}

// verifier is what the kinds verify their effect with: the zero Verifier
// (/proc, the OS's network), dialling the cluster's own network when it
// has one.
func (e *Experiment) verifier() verify.Verifier {
	cl := e.run.cluster()
	var v verify.Verifier
	if cl != nil {
		if nw := networkOf(cl); nw != nil {
			v.Dial = nw.DialContext
		}
	}
	return v
}

// targetKey is the key the run keeps a's target's bookkeeping under (its
// condition, the fault in force, its verification, its windows): the
// source's index, or -1-d for decoder d, so that a decoder's fault goes
// through the same steps as a source's (issue #41) without a second set
// of maps. A pair's is its decoder's: the fault is judged as the
// decoder's, on every pair but the one cut (check.DecoderChecks), and
// the source stays free for faults of its own.
func targetKey(a fault.Action) int {
	switch {
	case a.Pair:
		return -1 - a.Peer
	case a.Decoder:
		return -1 - a.Source
	}
	return a.Source
}

// actedOn is the key of the engine a's kind acts on: a pair's source
// (whose links the cut is put on, with its decoder as Fire.Peer), else
// targetKey.
func actedOn(a fault.Action) int {
	if a.Pair {
		return a.Source
	}
	return targetKey(a)
}

// keyName is the target of key i's name (targetKey): "source-0", "decoder-1".
func keyName(i int) string {
	if i < 0 {
		return fault.DecoderTarget(-1 - i)
	}
	return event.SourceName(i)
}

// source returns source i of the running cluster, or decoder -1-i for a
// negative i (targetKey).
func (e *Experiment) source(i int) (Target, error) {
	cl := e.run.cluster()
	if cl == nil {
		return nil, fmt.Errorf("the cluster is not up yet")
	}
	if i < 0 {
		decs := decodersOf(cl)
		if d := -1 - i; d < len(decs) {
			return decs[d], nil
		}
		return nil, fmt.Errorf("no %s: the cluster has %d decoders (--decoders)", keyName(i), len(decs))
	}
	srcs := cl.Sources()
	if i < 0 || i >= len(srcs) {
		return nil, fmt.Errorf("no %s: the cluster has %d sources", event.SourceName(i), len(srcs))
	}
	return srcs[i], nil
}

// refused records an action that could not be taken and returns why,
// its chain kept (a setup error is still a netfault.SetupError). A key's
// refusal by the kind's rule is the key's answer, shown by the face that
// asked, not a fault of the run: it is not recorded.
func (e *Experiment) refused(a fault.Action, by string, why error) error {
	var r *fault.Refused
	if by == byKey && errors.As(why, &r) {
		return why
	}
	e.faultEvent(a.Kind.Name, targetKey(a), rankName(a), 0, by, why)
	return why
}

// rankName is FaultInfo.Target of a: one rank's or a decoder's name, ""
// for a source.
func rankName(a fault.Action) string {
	if !a.OnRank && !a.Decoder && !a.Pair {
		return ""
	}
	return a.TargetName()
}

func (e *Experiment) faultEvent(action string, src int, target string, d time.Duration, by string, err error) {
	f := &event.FaultInfo{Action: action, Source: src, Target: target, Duration: d, By: by}
	if err != nil {
		f.Err = err.Error()
	}
	e.emit(event.Event{Kind: event.KindFault, Fault: f})
}

// verify records that the verification of the last action on src ends
// when done closes.
func (fs *faults) verify(src int, done chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.verifying[src] = done
}
