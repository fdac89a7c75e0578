package fault

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"p2pfault/event"
)

// ActionKill kills a source (SIGKILL) and restarts it on the same ports.
const ActionKill = "kill"

// ActionReady is the event of a killed or restored source answering
// again: its fault window closes. It is an event, not a kind.
const ActionReady = "ready"

func init() {
	Register(&Kind{
		Ranks: RankEngine,
		Name:  ActionKill, Key: "k", Help: "kill", LongHelp: "kill, restart", Order: 30,
		Needs: event.CondUp, Leaves: event.CondRestarting, Badge: "KILLED",
		Opens: true, Ending: EndsWithRecovery, Case: SeedCase,
		Act: actKill, Verify: verifyKill,
	})
}

// actKill returns once the kill is sent; the window opens then and closes
// when the restarted target is ready on the same ports.
func actKill(f *Fire) error {
	return restart(f, ActionKill, f.Target.Kill, func(f *Fire, readyAt time.Time, err error) {
		restarted(f, "restart", readyAt, err)
	})
}

// restart is the one way a kind ends a target at once and brings it back,
// kill on the same ports and replace on new ones: do is the target's
// Kill or Replace. It returns once the kill is sent (or failed); the
// window opens at the signal, and back records the outcome of the
// restart, which goes on in the background.
func restart(f *Fire, action string, do func(context.Context, func(time.Time, error)) (time.Time, error), back func(f *Fire, readyAt time.Time, err error)) error {
	env := f.Env
	f.Enter()
	// The old session and addresses, read before they go, for the Verify.
	f.before, f.hasHost = observe(f.Target)
	f.restart = make(chan error, 1)
	killed := make(chan error, 1)
	env.Go(func() {
		var signalled atomic.Bool
		readyAt, err := do(env.Context(), func(at time.Time, err error) {
			if err == nil {
				env.Record(action, 0, f.By, nil)
				env.OpenWindow(at, true)
				env.Changed()
			}
			signalled.Store(true)
			killed <- err
		})
		if !signalled.Load() {
			// It failed before the kill was sent: nothing went down.
			f.Lift()
			killed <- err
			f.restart <- err
			return
		}
		back(f, readyAt, err)
		f.restart <- err
	})
	if err := <-killed; err != nil {
		err = fmt.Errorf("%s %s: %w", action, f.Target.Name(), err)
		env.Record(action, 0, f.By, err)
		return err
	}
	return nil
}

// restarted records the outcome of a restart or restore: the window
// closes when the target is ready again; one that cannot come back fails
// the run.
func restarted(f *Fire, what string, readyAt time.Time, err error) {
	env := f.Env
	if err != nil {
		if env.Context().Err() == nil {
			env.Record(ActionReady, 0, f.By, err)
			env.Fail(fmt.Errorf("%s %s: %w", what, f.Target.Name(), err))
		}
		return
	}
	f.Lift()
	env.Record(ActionReady, 0, f.By, nil)
	env.CloseWindow(readyAt)
	env.Changed()
}
