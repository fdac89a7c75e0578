package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/runner/session"
)

type EndFunc func(sid int) error

// terminate is the default EndFunc: SIGTERM, then SIGCONT so that a
// stalled engine can act on it.
func terminate(sid int) error {
	// A session that must not be signalled is refused once, not once per
	// signal.
	if err := session.Guard(sid); err != nil {
		return err
	}
	var errs []error
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGCONT} {
		// The session may empty between the two: that is success.
		if _, err := session.Signal(sid, sig); err != nil && !errors.Is(err, session.ErrNoMembers) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killWait bounds the wait for a session to empty after SIGKILL, which the
// kernel acts on at once even for stopped processes.
const killWait = 5 * time.Second

// end ends p with endFn (nil: SIGTERM), waits for the session to empty
// within StopGrace (or ctx), then SIGKILLs what is left and waits again.
func (e *Engine) end(ctx context.Context, p *process, endFn EndFunc) error {
	if endFn == nil {
		endFn = terminate
	}
	var sigErr error
	if !p.reaped() {
		if err := endFn(p.sid); err != nil && !errors.Is(err, session.ErrNoMembers) {
			sigErr = err
		}
	}
	gone := func(ctx context.Context) error { return waitGone(ctx, p) }
	if err := session.Drain(ctx, p.sid, e.c.cfg.StopGrace, killWait, gone); err != nil {
		return fmt.Errorf("end %s session %d: %w", e.spec.Name, p.sid, errors.Join(sigErr, err))
	}
	return nil
}

// waitGone waits until p is reaped and its session has no live process.
func waitGone(ctx context.Context, p *process) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("pid %d not reaped: %w", p.pid, ctx.Err())
	}
	return session.WaitGone(ctx, p.sid, 10*time.Millisecond)
}

// begin is the opening every engine operation shares (Restart, Replace,
// Remove, Restore): a context the cluster's Stop also cancels, the
// engine's op lock, and a refusal once the cluster is stopping. what
// names the operation in that refusal. On success the caller defers done.
func (e *Engine) begin(ctx context.Context, what string) (opCtx context.Context, done func(), err error) {
	ctx, cancel := e.c.opContext(ctx)
	e.op.Lock()
	done = func() {
		e.op.Unlock()
		cancel()
	}
	if e.c.life.Err() != nil {
		done()
		return nil, nil, fmt.Errorf("%s %s: %w", what, e.spec.Name, errStopping)
	}
	return ctx, done, nil
}

// Restart ends the engine's session with endFn (nil: SIGTERM, SIGKILL after
// the grace) and starts it again on the same ports in a new session once
// the ports are free, then waits until it is ready.
func (e *Engine) Restart(ctx context.Context, endFn EndFunc) error {
	return e.restart(ctx, endFn, "restart", false)
}

// Replace is Restart on new ports: it ends the engine's session with endFn
// (nil: SIGTERM, SIGKILL after the grace) and starts a new engine in its
// place on new ports, HTTP and P2P, drawn from the cluster's pool of free
// ports, in a new session (recorded in sessions.json as a restart is),
// then waits until it is ready. From the moment the new ports are drawn
// the engine's ports, URL, state and command line are the new engine's.
func (e *Engine) Replace(ctx context.Context, endFn EndFunc) error {
	return e.restart(ctx, endFn, "replace", true)
}

// restart is Restart and Replace: what names it in errors, newPorts moves
// the engine to new ports between the end and the new start.
func (e *Engine) restart(ctx context.Context, endFn EndFunc, what string, newPorts bool) error {
	ctx, done, err := e.begin(ctx, what)
	if err != nil {
		return err
	}
	defer done()
	e.mu.Lock()
	p := e.proc
	e.intent = intentRestart
	e.changeLocked(event.StateRestarting)
	e.mu.Unlock()
	if p != nil {
		if err := e.end(ctx, p, endFn); err != nil {
			return e.failRestart(fmt.Errorf("%s %s: %w", what, e.spec.Name, err))
		}
	}
	if newPorts {
		if err := e.movePorts(); err != nil {
			return e.failRestart(fmt.Errorf("%s %s: %w", what, e.spec.Name, err))
		}
	}
	return e.relaunch(ctx, what)
}

// movePorts draws the engine's new ports (and the argv naming them) from
// the cluster's pool; the faces see them at once. The caller holds e.op.
func (e *Engine) movePorts() error {
	next, err := e.c.replacementSpec(e)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.spec.HTTPPort, e.spec.P2PPort, e.spec.Args = next.HTTPPort, next.P2PPort, next.Args
	e.changeLocked(event.StateRestarting) // the faces see the new ports
	e.mu.Unlock()
	_ = e.c.writeSessions()
	return nil
}

// Remove ends the engine's session with endFn (nil: SIGTERM, SIGKILL after
// the grace) and leaves it down; Restore brings it back.
func (e *Engine) Remove(ctx context.Context, endFn EndFunc) error {
	ctx, done, err := e.begin(ctx, "remove")
	if err != nil {
		return err
	}
	defer done()
	e.mu.Lock()
	p := e.proc
	if e.state == event.StateRemoved {
		e.mu.Unlock()
		return fmt.Errorf("remove %s: it is already removed", e.spec.Name)
	}
	e.intent = intentRemove
	e.mu.Unlock()
	if p != nil {
		err = e.end(ctx, p, endFn)
	}
	e.mu.Lock()
	if p != nil {
		e.exit = p.exitStatus()
	}
	e.changeLocked(event.StateRemoved)
	e.mu.Unlock()
	_ = e.c.writeSessions()
	if err != nil {
		return fmt.Errorf("remove %s: %w", e.spec.Name, err)
	}
	return nil
}

// Restore starts a removed (or exited) engine again on its ports and waits
// until it is ready.
func (e *Engine) Restore(ctx context.Context) error {
	ctx, done, err := e.begin(ctx, "restore")
	if err != nil {
		return err
	}
	defer done()
	e.mu.Lock()
	state, p := e.state, e.proc
	e.mu.Unlock()
	if state != event.StateRemoved && state != event.StateExited {
		return fmt.Errorf("restore %s: it is %s, not removed", e.spec.Name, state)
	}
	if p != nil && !p.reaped() {
		return fmt.Errorf("restore %s: its pid %d is still running", e.spec.Name, p.pid)
	}
	return e.relaunch(ctx, "restore")
}

// relaunch starts a new process once the engine's ports are free and waits
// for readiness. The caller holds e.op.
func (e *Engine) relaunch(ctx context.Context, what string) error {
	if err := waitPortsFree(ctx, e.spec.Name, e.HTTPPort(), e.P2PPort()); err != nil {
		return e.failRestart(err)
	}
	p, err := e.launch(e.c.restartArgs())
	if err != nil {
		return e.failRestart(fmt.Errorf("%s %s: %w", what, e.spec.Name, err))
	}
	if err := e.waitReady(ctx, p); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// failRestart marks an engine that could not be brought back as exited.
func (e *Engine) failRestart(err error) error {
	e.mu.Lock()
	if e.state == event.StateRestarting || e.state == event.StateRemoved {
		e.exit = "restart failed"
		e.changeLocked(event.StateExited)
	}
	e.mu.Unlock()
	return err
}

// stopForGood ends the engine for the cluster's Stop.
func (e *Engine) stopForGood(ctx context.Context) error {
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	p := e.proc
	e.intent = intentStop
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	err := e.end(ctx, p, nil)
	select {
	case <-p.logsDone:
	case <-time.After(2 * time.Second):
	}
	e.mu.Lock()
	if e.state != event.StateRemoved && e.state != event.StateExited {
		e.exit = p.exitStatus()
		e.changeLocked(event.StateExited)
	}
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stop %s: %w", e.spec.Name, err)
	}
	return nil
}
