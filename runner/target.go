package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/runner/session"
)

// Target is an engine as fault kinds act on it (it implements
// fault.Target): signals reach exactly its session, every process whose
// session id is the engine's, found in /proc, never by name, never session
// 0, 1 or p2pfault's own.
type Target struct{ *Engine }

// Target returns e as fault kinds act on it.
func (e *Engine) Target() Target { return Target{e} }

func (t Target) notRunning() error {
	return fmt.Errorf("it is not running (%s)", t.Info().State)
}

// Stop SIGSTOPs every process of the session and returns once /proc shows
// all of them stopped (state T); if they do not all stop, it SIGCONTs them
// (session.Stop, which runs the session's guard: once, before anything is
// signalled).
func (t Target) Stop(ctx context.Context) (time.Time, error) {
	_, sid, ok := t.Session()
	if !ok {
		return time.Time{}, t.notRunning()
	}
	ms, err := session.Members(sid)
	if err != nil {
		return time.Time{}, err
	}
	at, _, err := session.Stop(ctx, sid, ms)
	if err != nil {
		return time.Time{}, err
	}
	return at, nil
}

// Continue SIGCONTs the session and returns once /proc shows none of its
// processes stopped.
func (t Target) Continue(ctx context.Context) error {
	_, sid, ok := t.Session()
	if !ok {
		return t.notRunning()
	}
	pids, err := session.Signal(sid, unix.SIGCONT)
	if err != nil {
		return fmt.Errorf("session %d: %w", sid, err)
	}
	if err := session.WaitContinued(ctx, pids); err != nil {
		return fmt.Errorf("session %d: %w", sid, err)
	}
	return nil
}

// signal is the EndFunc of Kill, Replace and Terminate, the one place a
// target's signal is sent: sig to every process of the session, the time
// and error told to signalled (if set) as soon as it is sent, then each of
// then (an empty session by then is no error).
func signal(sig unix.Signal, signalled func(time.Time, error), then ...unix.Signal) EndFunc {
	return func(sid int) error {
		at := time.Now()
		// A session that must not be signalled is refused once, not once
		// per signal.
		if err := session.Guard(sid); err != nil {
			if signalled != nil {
				signalled(at, err)
			}
			return err
		}
		_, err := session.Signal(sid, sig)
		if signalled != nil {
			signalled(at, err)
		}
		for _, s := range then {
			if _, serr := session.Signal(sid, s); serr != nil && !errors.Is(serr, session.ErrNoMembers) {
				err = errors.Join(err, serr)
			}
		}
		return err
	}
}

// Kill SIGKILLs every process of the session, restarts the engine on the
// same ports in a new session once they are free, and returns when it is
// ready.
func (t Target) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.killThen(ctx, t.Engine.Restart, signalled)
}

// Replace SIGKILLs every process of the session and starts a new engine in
// its place on new ports (HTTP and P2P) in a new session, and returns when
// it is ready (Engine.Replace); the target's ports and URL are then the
// new engine's.
func (t Target) Replace(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.killThen(ctx, t.Engine.Replace, signalled)
}

// killThen is Kill and Replace: restart is the engine's Restart (same
// ports) or Replace (new ones), ending the session with SIGKILL; it
// returns when the engine is ready again.
func (t Target) killThen(ctx context.Context, restart func(context.Context, EndFunc) error, signalled func(time.Time, error)) (time.Time, error) {
	if _, _, ok := t.Session(); !ok {
		return time.Time{}, t.notRunning()
	}
	if err := restart(ctx, signal(unix.SIGKILL, signalled)); err != nil {
		return time.Time{}, err
	}
	return t.ReadyAt(), nil
}

// Terminate sends SIGTERM to every process of the session (and SIGCONT,
// so a stalled engine can act on it); the runner SIGKILLs what is left
// after its stop grace. It returns once every process is gone; the engine
// stays down until Restore.
func (t Target) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	if _, _, ok := t.Session(); !ok {
		return t.notRunning()
	}
	return t.Engine.Remove(ctx, signal(unix.SIGTERM, signalled, unix.SIGCONT))
}

// Restore starts a removed engine again on its ports and returns when it
// is ready.
func (t Target) Restore(ctx context.Context) (time.Time, error) {
	if err := t.Engine.Restore(ctx); err != nil {
		return time.Time{}, err
	}
	return t.ReadyAt(), nil
}

// CanReplace is nil: p2pfault launched the engine, so it can start it on
// any ports.
func (t Target) CanReplace() error { return nil }
