package experiment

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/runner"
)

// Who fired a fault.
const (
	byScript = "script"
	byKey    = "key"
)

// play fires the scripted timeline's steps at their times, then waits for
// the run's end: recovery after each closed window, FaultFor after a
// removal. It closes e.settled when the run should end.
func (e *Experiment) play(t0 time.Time) {
	if len(e.timeline) == 0 {
		return
	}
	for _, step := range e.timeline {
		if !e.sleepUntil(t0.Add(step.At)) {
			return
		}
		var err error
		switch step.Action {
		case fault.ActionStall:
			err = e.stall(step.Source, step.For, byScript)
		case fault.ActionResume:
			err = e.resume(step.Source, byScript)
		case fault.ActionKill:
			err = e.kill(step.Source, byScript)
		case fault.ActionRemove:
			err = e.remove(step.Source, byScript)
		case fault.ActionRestore:
			err = e.restore(step.Source, byScript)
		default:
			err = fmt.Errorf("timeline step %q: unknown action", step.Action)
		}
		if err != nil {
			e.fail(fmt.Errorf("scripted %s of source-%d at %s: %w", step.Action, step.Source, step.At, err))
			return
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if end, ok := e.scriptEnd(); ok && time.Since(t0) >= end {
			close(e.settled)
			return
		}
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scriptEnd is when a scripted run ends, once every window it opened can
// tell: ok is false while a window that will close (a stall, a restart) is
// still open.
func (e *Experiment) scriptEnd() (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	end := e.plannedEnd()
	for _, w := range e.windows {
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

func (e *Experiment) sleepUntil(t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-e.ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// source returns source i of the running cluster.
func (e *Experiment) source(i int) (*runner.Engine, error) {
	e.mu.Lock()
	cl := e.cluster
	e.mu.Unlock()
	if cl == nil {
		return nil, fmt.Errorf("the cluster is not up yet")
	}
	srcs := cl.Sources()
	if i < 0 || i >= len(srcs) {
		return nil, fmt.Errorf("no source-%d: the cluster has %d sources", i, len(srcs))
	}
	return srcs[i], nil
}

// refuse says why a fault cannot be fired on source i now ("" if it can).
func (e *Experiment) refuse(i int, action string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if why := e.down[i]; why != "" {
		return fmt.Sprintf("cannot %s source-%d: it is %s", action, i, why)
	}
	return ""
}

func (e *Experiment) faultEvent(action string, src int, d time.Duration, by string, err error) {
	f := &event.FaultInfo{Action: action, Source: src, Duration: d, By: by}
	if err != nil {
		f.Err = err.Error()
	}
	e.emit(event.Event{Kind: event.KindFault, Fault: f})
}

// openWindow starts a fault window on src; recovers says whether it will
// close (stall, kill) or last to the end of the run (remove).
func (e *Experiment) openWindow(src int, at time.Time, recovers bool) {
	t := e.rel(at)
	w := check.Window{Source: src, Start: t, Recovers: recovers}
	e.mu.Lock()
	e.windows = append(e.windows, w)
	e.mu.Unlock()
	e.emit(event.Event{Kind: event.KindWindow, Window: &w})
	e.setPhase(event.PhaseFault)
}

// closeWindow ends the open window on src, if any.
func (e *Experiment) closeWindow(src int, at time.Time) {
	t := e.rel(at)
	var closed *check.Window
	e.mu.Lock()
	for i := len(e.windows) - 1; i >= 0; i-- {
		if w := &e.windows[i]; w.Source == src && w.End == 0 {
			w.End = max(t, w.Start+1)
			w.Recovers = true
			c := *w
			closed = &c
			break
		}
	}
	e.mu.Unlock()
	if closed != nil {
		e.emit(event.Event{Kind: event.KindWindow, Window: closed})
		e.setPhase(event.PhaseRecovery)
	}
}

func (e *Experiment) stall(src int, d time.Duration, by string) error {
	if why := e.refuse(src, "stall"); why != "" {
		return e.refused(event.ActionStall, src, by, why)
	}
	en, err := e.source(src)
	if err != nil {
		return e.refused(event.ActionStall, src, by, err.Error())
	}
	// fault resumes the session by itself after d, and at once when the
	// run's context ends: a stall never outlives its run.
	st, err := fault.Stall(e.ctx, en, d)
	if err != nil {
		e.faultEvent(event.ActionStall, src, d, by, err)
		return err
	}
	e.mu.Lock()
	e.down[src] = "stalled"
	e.stalls[src] = st
	e.mu.Unlock()
	e.faultEvent(event.ActionStall, src, d, by, nil)
	e.openWindow(src, st.StoppedAt(), true)
	e.emitEngines()
	go e.safely(func() { e.awaitResume(src, st, by) })
	return nil
}

// awaitResume closes a stall's window when its session has been resumed,
// by the timer or by Resume.
func (e *Experiment) awaitResume(src int, st *fault.Stalled, by string) {
	<-st.Done()
	e.mu.Lock()
	delete(e.stalls, src)
	delete(e.down, src)
	early := e.resumedEarly[src]
	delete(e.resumedEarly, src)
	e.mu.Unlock()
	if early {
		by = byKey
	}
	e.faultEvent(event.ActionResume, src, 0, by, st.Err())
	e.closeWindow(src, st.ResumedAt())
	e.emitEngines()
}

func (e *Experiment) resume(src int, by string) error {
	e.mu.Lock()
	st := e.stalls[src]
	if st != nil {
		e.resumedEarly[src] = true
	}
	e.mu.Unlock()
	if st == nil {
		return e.refused(event.ActionResume, src, by, fmt.Sprintf("cannot resume source-%d: it is not stalled", src))
	}
	return st.Resume()
}

func (e *Experiment) kill(src int, by string) error {
	if why := e.refuse(src, "kill"); why != "" {
		return e.refused(event.ActionKill, src, by, why)
	}
	en, err := e.source(src)
	if err != nil {
		return e.refused(event.ActionKill, src, by, err.Error())
	}
	e.mu.Lock()
	e.down[src] = "restarting"
	e.mu.Unlock()
	killed := make(chan error, 1)
	var signalled atomic.Bool
	go e.safely(func() {
		// The window opens when SIGKILL is sent and closes when the
		// restarted engine is ready on the same ports.
		err := en.Restart(e.ctx, func(sid int) error {
			at := time.Now()
			_, err := fault.SignalSession(sid, unix.SIGKILL)
			if err == nil {
				e.faultEvent(event.ActionKill, src, 0, by, nil)
				e.openWindow(src, at, true)
				e.emitEngines()
			}
			signalled.Store(true)
			killed <- err
			return err
		})
		if !signalled.Load() {
			killed <- err // the restart failed before it signalled
		}
		e.restarted(en, src, by, "restart", err)
	})
	if err := <-killed; err != nil {
		e.faultEvent(event.ActionKill, src, 0, by, err)
		return err
	}
	return nil
}

// restarted records the outcome of a restart or restore: the window
// closes when the source is ready again; a source that cannot come back
// fails the run.
func (e *Experiment) restarted(en *runner.Engine, src int, by, what string, err error) {
	if err != nil {
		if e.ctx.Err() == nil {
			e.faultEvent(event.ActionReady, src, 0, by, err)
			e.fail(fmt.Errorf("%s source-%d: %w", what, src, err))
		}
		return
	}
	e.mu.Lock()
	delete(e.down, src)
	e.mu.Unlock()
	e.faultEvent(event.ActionReady, src, 0, by, nil)
	e.closeWindow(src, en.Info().ReadyAt)
	e.emitEngines()
}

func (e *Experiment) remove(src int, by string) error {
	if why := e.refuse(src, "remove"); why != "" {
		return e.refused(event.ActionRemove, src, by, why)
	}
	en, err := e.source(src)
	if err != nil {
		return e.refused(event.ActionRemove, src, by, err.Error())
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	at, err := fault.Remove(ctx, en)
	if err != nil {
		e.faultEvent(event.ActionRemove, src, 0, by, err)
		return err
	}
	e.mu.Lock()
	e.down[src] = "removed"
	e.mu.Unlock()
	e.faultEvent(event.ActionRemove, src, 0, by, nil)
	e.openWindow(src, at, false)
	e.emitEngines()
	return nil
}

func (e *Experiment) restore(src int, by string) error {
	e.mu.Lock()
	removed := e.down[src] == "removed"
	if removed {
		e.down[src] = "restarting"
	}
	e.mu.Unlock()
	if !removed {
		return e.refused(event.ActionRestore, src, by, fmt.Sprintf("cannot restore source-%d: it is not removed", src))
	}
	en, err := e.source(src)
	if err != nil {
		return e.refused(event.ActionRestore, src, by, err.Error())
	}
	e.faultEvent(event.ActionRestore, src, 0, by, nil)
	e.openWindow(src, time.Now(), true) // the restore's own window: down until ready
	go e.safely(func() {
		_, err := fault.Restore(e.ctx, en)
		e.restarted(en, src, by, "restore", err)
	})
	return nil
}

// refused records an action that could not be taken and returns why.
func (e *Experiment) refused(action string, src int, by, why string) error {
	err := fmt.Errorf("%s", why)
	e.faultEvent(action, src, 0, by, err)
	return err
}

// The Controller, for the dashboard's keys.

// Stall stops source i for the configured stall length.
func (e *Experiment) Stall(i int) error { return e.stall(i, e.cfg.scale(e.cfg.FaultFor), byKey) }

// Resume continues a stalled source now.
func (e *Experiment) Resume(i int) error { return e.resume(i, byKey) }

// Kill kills source i; it restarts on the same ports.
func (e *Experiment) Kill(i int) error { return e.kill(i, byKey) }

// Remove stops source i and leaves it down.
func (e *Experiment) Remove(i int) error { return e.remove(i, byKey) }

// Restore brings a removed source back.
func (e *Experiment) Restore(i int) error { return e.restore(i, byKey) }

var _ event.Controller = (*Experiment)(nil)
