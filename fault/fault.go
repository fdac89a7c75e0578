// Package fault injects the seed's faults into a runner engine — stall
// (SIGSTOP its whole session, SIGCONT later), kill (SIGKILL the session,
// restart on the same ports), remove (SIGTERM, left down) — and plays a
// scripted timeline of them. Signals reach exactly the engine's session:
// every process whose session id is the engine's, found in /proc, never by
// name, never session 0, 1 or p2pfault's own.
package fault

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/runner"
	"p2pfault/runner/session"
)

// SignalSession sends sig to every live process of session sid, found by
// enumerating /proc, and returns their pids. It refuses sid <= 1 and
// p2pfault's own session, and checks each process's session again through
// a pidfd so a reused pid is never hit.
func SignalSession(sid int, sig unix.Signal) ([]int, error) {
	return session.Signal(sid, sig)
}

// confirmTimeout bounds the wait for /proc to show that a signal took
// effect (every thread of a process must stop before it shows T).
const confirmTimeout = 5 * time.Second

// confirmPoll is how often /proc is read while confirming.
const confirmPoll = 500 * time.Microsecond

// Stalled is a stalled engine: every process of its session SIGSTOPped.
type Stalled struct {
	engine    *runner.Engine
	sid       int
	pids      []int
	stoppedAt time.Time

	once      sync.Once
	done      chan struct{}
	resumedAt time.Time
	err       error
}

// Stall SIGSTOPs every process of e's session and returns once /proc shows
// all of them stopped (state T). With d > 0 it resumes them by itself after
// d; with d == 0 they stay stopped until Resume. When ctx ends first the
// engine is resumed at once: a stall never outlives its run.
func Stall(ctx context.Context, e *runner.Engine, d time.Duration) (*Stalled, error) {
	if d < 0 {
		return nil, fmt.Errorf("stall %s: negative duration %v", e.Name(), d)
	}
	_, sid, ok := e.Session()
	if !ok {
		return nil, fmt.Errorf("stall %s: it is not running (%s)", e.Name(), e.Info().State)
	}
	if err := session.Guard(sid); err != nil {
		return nil, fmt.Errorf("stall %s: %w", e.Name(), err)
	}
	ms, err := session.Members(sid)
	if err != nil {
		return nil, fmt.Errorf("stall %s: %w", e.Name(), err)
	}
	for _, m := range ms {
		if m.Live() && m.Stopped() {
			return nil, fmt.Errorf("stall %s: pid %d of session %d is already stopped", e.Name(), m.Pid, sid)
		}
	}
	at := time.Now()
	pids, err := session.SignalMembers(sid, ms, unix.SIGSTOP)
	if err != nil {
		return nil, fmt.Errorf("stall %s: %w", e.Name(), err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	if err := session.WaitStates(cctx, pids, session.Proc.Stopped, confirmPoll); err != nil {
		_, _ = SignalSession(sid, unix.SIGCONT)
		return nil, fmt.Errorf("stall %s: session %d: %w", e.Name(), sid, err)
	}
	s := &Stalled{engine: e, sid: sid, pids: pids, stoppedAt: at, done: make(chan struct{})}
	go s.resumeLater(ctx, d)
	return s, nil
}

func (s *Stalled) resumeLater(ctx context.Context, d time.Duration) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d - time.Since(s.stoppedAt))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-ctx.Done():
	case <-s.done:
		return
	}
	_ = s.Resume()
}

// Resume SIGCONTs the session now (if it was not resumed already) and
// returns once /proc shows its processes running again.
func (s *Stalled) Resume() error {
	s.once.Do(func() {
		at := time.Now()
		_, err := SignalSession(s.sid, unix.SIGCONT)
		if err == nil {
			cctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
			err = session.WaitStates(cctx, s.pids, func(p session.Proc) bool { return !p.Stopped() }, confirmPoll)
			cancel()
		}
		if err != nil {
			err = fmt.Errorf("resume %s: session %d: %w", s.engine.Name(), s.sid, err)
		}
		s.resumedAt, s.err = at, err
		close(s.done)
	})
	<-s.done
	return s.err
}

// errDropped ends a stall whose engine was killed or removed meanwhile:
// there is nothing left to resume.
var errDropped = errors.New("stall dropped: the engine was killed or removed")

// drop ends the stall without SIGCONT.
func (s *Stalled) drop() {
	s.once.Do(func() {
		s.resumedAt, s.err = time.Now(), errDropped
		close(s.done)
	})
}

// Engine is the stalled engine.
func (s *Stalled) Engine() *runner.Engine { return s.engine }

// Pids are the processes that were stopped.
func (s *Stalled) Pids() []int { return append([]int(nil), s.pids...) }

// StoppedAt is when SIGSTOP was sent: the fault window opens.
func (s *Stalled) StoppedAt() time.Time { return s.stoppedAt }

// Done is closed once the engine has been resumed.
func (s *Stalled) Done() <-chan struct{} { return s.done }

// ResumedAt is when SIGCONT was sent (the stall's fault window closes),
// zero before Done is closed.
func (s *Stalled) ResumedAt() time.Time {
	select {
	case <-s.done:
		return s.resumedAt
	default:
		return time.Time{}
	}
}

// Err is the resume's error, nil before Done is closed.
func (s *Stalled) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Killed is the outcome of Kill.
type Killed struct {
	OldSid, NewSid int
	KilledAt       time.Time // SIGKILL sent: the fault window opens
	ReadyAt        time.Time // the restarted engine answered /health: the window closes
}

// Kill SIGKILLs every process of e's session, restarts e on the same ports
// in a new session once they are free, and returns when it is ready.
func Kill(ctx context.Context, e *runner.Engine) (Killed, error) {
	return kill(ctx, e, nil)
}

// kill is Kill, calling onKilled (if set) as soon as SIGKILL is sent.
func kill(ctx context.Context, e *runner.Engine, onKilled func(time.Time)) (Killed, error) {
	var k Killed
	_, sid, ok := e.Session()
	if !ok {
		return k, fmt.Errorf("kill %s: it is not running (%s)", e.Name(), e.Info().State)
	}
	k.OldSid = sid
	err := e.Restart(ctx, func(sid int) error {
		k.KilledAt = time.Now()
		_, err := SignalSession(sid, unix.SIGKILL)
		if err == nil && onKilled != nil {
			onKilled(k.KilledAt)
		}
		return err
	})
	in := e.Info()
	k.NewSid, k.ReadyAt = in.Sid, in.ReadyAt
	if err != nil {
		return k, fmt.Errorf("kill %s: %w", e.Name(), err)
	}
	return k, nil
}

// Remove sends SIGTERM to every process of e's session (and SIGCONT, so a
// stalled engine can act on it); the runner SIGKILLs what is left after its
// stop grace. The engine stays down until Restore. It returns, once every
// process is gone, the time SIGTERM was sent.
func Remove(ctx context.Context, e *runner.Engine) (time.Time, error) {
	return remove(ctx, e, nil)
}

// remove is Remove, calling onTerm (if set) as soon as SIGTERM is sent.
func remove(ctx context.Context, e *runner.Engine, onTerm func(time.Time)) (time.Time, error) {
	if _, _, ok := e.Session(); !ok {
		return time.Time{}, fmt.Errorf("remove %s: it is not running (%s)", e.Name(), e.Info().State)
	}
	var at time.Time
	err := e.Remove(ctx, func(sid int) error {
		at = time.Now()
		_, err := SignalSession(sid, unix.SIGTERM)
		if err == nil && onTerm != nil {
			onTerm(at)
		}
		if _, cerr := SignalSession(sid, unix.SIGCONT); cerr != nil && !errors.Is(cerr, session.ErrNoMembers) {
			err = errors.Join(err, cerr)
		}
		return err
	})
	if err != nil {
		return at, fmt.Errorf("remove %s: %w", e.Name(), err)
	}
	return at, nil
}

// Restore starts a removed engine again on its ports and returns when it
// is ready.
func Restore(ctx context.Context, e *runner.Engine) (time.Time, error) {
	if err := e.Restore(ctx); err != nil {
		return time.Time{}, err
	}
	return e.Info().ReadyAt, nil
}
