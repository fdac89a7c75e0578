package fault

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"p2pfault/runner"
)

// ActionReady is the event of a killed or restored source answering
// /health again: the kill's fault window closes.
const ActionReady = "ready"

// Event is a fault action on a source as it happened. The stall's window
// closes at its resume event, the kill's at its ready event.
type Event struct {
	Action   string // stall, resume, kill, ready, remove, restore
	Source   int
	At       time.Time
	Duration time.Duration // stall: how long it was asked to last (0: until resume)
	Err      error         // the action could not be taken
}

// Injector applies faults to the sources of a cluster by index and reports
// every action as an Event. It keeps track of stalls so a resume, a timed
// resume or Close reaches the right one, and so no stall outlives it.
type Injector struct {
	ctx     context.Context
	sources []*runner.Engine
	notify  func(Event)

	mu     sync.Mutex
	stalls map[int]*Stalled
	wg     sync.WaitGroup
}

// NewInjector returns an injector for sources (index = source number).
// notify receives every Event, from the goroutine that took the action or
// from the one that resumed a stall; it must be safe for concurrent use.
// Timed resumes end with ctx (the stall is then resumed at once).
func NewInjector(ctx context.Context, sources []*runner.Engine, notify func(Event)) *Injector {
	if notify == nil {
		notify = func(Event) {}
	}
	return &Injector{ctx: ctx, sources: sources, notify: notify, stalls: map[int]*Stalled{}}
}

func (in *Injector) source(i int) (*runner.Engine, error) {
	if i < 0 || i >= len(in.sources) {
		return nil, fmt.Errorf("source %d: the cluster has sources 0-%d", i, len(in.sources)-1)
	}
	return in.sources[i], nil
}

// fail reports an action that could not be taken.
func (in *Injector) fail(action string, source int, err error) error {
	in.notify(Event{Action: action, Source: source, At: time.Now(), Err: err})
	return err
}

// Stall SIGSTOPs source's session; it resumes after d (0: on Resume).
func (in *Injector) Stall(source int, d time.Duration) error {
	e, err := in.source(source)
	if err != nil {
		return in.fail(ActionStall, source, err)
	}
	in.mu.Lock()
	if _, busy := in.stalls[source]; busy {
		in.mu.Unlock()
		return in.fail(ActionStall, source, fmt.Errorf("stall %s: it is already stalled", e.Name()))
	}
	in.stalls[source] = nil // reserved while the stall is taken, outside the lock
	in.mu.Unlock()
	st, err := Stall(in.ctx, e, d)
	in.mu.Lock()
	if err != nil {
		delete(in.stalls, source)
	} else {
		in.stalls[source] = st
	}
	in.mu.Unlock()
	if err != nil {
		return in.fail(ActionStall, source, err)
	}
	in.notify(Event{Action: ActionStall, Source: source, At: st.StoppedAt(), Duration: d})
	in.wg.Go(func() {
		<-st.Done()
		in.mu.Lock()
		if in.stalls[source] == st {
			delete(in.stalls, source)
		}
		in.mu.Unlock()
		if !errors.Is(st.Err(), errDropped) {
			in.notify(Event{Action: ActionResume, Source: source, At: st.ResumedAt(), Err: st.Err()})
		}
	})
	return nil
}

// Resume SIGCONTs a stalled source now.
func (in *Injector) Resume(source int) error {
	in.mu.Lock()
	st := in.stalls[source]
	in.mu.Unlock()
	if st == nil {
		return in.fail(ActionResume, source, fmt.Errorf("resume source-%d: it is not stalled", source))
	}
	return st.Resume()
}

// dropStall forgets a stall of a source that is about to be killed or
// removed: SIGKILL needs no SIGCONT, and SIGTERM gets its own.
func (in *Injector) dropStall(source int) {
	in.mu.Lock()
	st := in.stalls[source]
	delete(in.stalls, source)
	in.mu.Unlock()
	if st != nil {
		st.drop()
	}
}

// Kill SIGKILLs source's session and restarts it on the same ports; it
// returns when the source is ready again (the ready event).
func (in *Injector) Kill(ctx context.Context, source int) error {
	e, err := in.source(source)
	if err != nil {
		return in.fail(ActionKill, source, err)
	}
	in.dropStall(source)
	sent := false
	k, err := kill(ctx, e, func(at time.Time) {
		sent = true
		in.notify(Event{Action: ActionKill, Source: source, At: at})
	})
	if err != nil {
		if !sent {
			return in.fail(ActionKill, source, err)
		}
		return in.fail(ActionReady, source, err)
	}
	in.notify(Event{Action: ActionReady, Source: source, At: k.ReadyAt})
	return nil
}

// Remove SIGTERMs source's session and leaves it down.
func (in *Injector) Remove(ctx context.Context, source int) error {
	e, err := in.source(source)
	if err != nil {
		return in.fail(ActionRemove, source, err)
	}
	in.dropStall(source)
	sent := false
	_, err = remove(ctx, e, func(at time.Time) {
		sent = true
		in.notify(Event{Action: ActionRemove, Source: source, At: at})
	})
	if err != nil && !sent {
		return in.fail(ActionRemove, source, err)
	}
	return err
}

// Restore brings a removed source back; it returns when it is ready.
func (in *Injector) Restore(ctx context.Context, source int) error {
	e, err := in.source(source)
	if err != nil {
		return in.fail(ActionRestore, source, err)
	}
	in.notify(Event{Action: ActionRestore, Source: source, At: time.Now()})
	readyAt, err := Restore(ctx, e)
	if err != nil {
		return in.fail(ActionReady, source, err)
	}
	in.notify(Event{Action: ActionReady, Source: source, At: readyAt})
	return nil
}

// Do applies one timeline step.
func (in *Injector) Do(ctx context.Context, s Step) error {
	switch s.Action {
	case ActionStall:
		return in.Stall(s.Source, s.For)
	case ActionResume:
		return in.Resume(s.Source)
	case ActionKill:
		return in.Kill(ctx, s.Source)
	case ActionRemove:
		return in.Remove(ctx, s.Source)
	case ActionRestore:
		return in.Restore(ctx, s.Source)
	}
	return fmt.Errorf("step %q: unknown action %q", s, s.Action)
}

// Close resumes every stall still in force and waits for their events.
func (in *Injector) Close() error {
	in.mu.Lock()
	var open []*Stalled
	for _, st := range in.stalls {
		if st != nil {
			open = append(open, st)
		}
	}
	in.mu.Unlock()
	var errs []error
	for _, st := range open {
		errs = append(errs, st.Resume())
	}
	in.wg.Wait()
	return errors.Join(errs...)
}
