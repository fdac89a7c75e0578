package fault

import (
	"context"
	"errors"
	"time"
)

// Target is what fault kinds act on: one engine, however it is reached.
// The runner's launched engines are one implementation (runner.Target);
// an engine p2pfault did not start is another (package attach). Every
// action takes the run's context; errors say what went wrong without the
// target's name: the kinds add it.
//
// Two abilities are optional, because a target truly may lack them, and
// a kind that needs one type-asserts for it and says what is missing:
//   - Inspectable: its processes and listeners can be read on this host,
//     so a kind's Verify can confirm the effect (an engine on another host
//     has none to read);
//   - NetTarget (network.go): its ports are on this host, where the run's
//     firewall can drop them (partition, loss, heal).
type Target interface {
	Name() string
	// Stop stops every process of the target (SIGSTOP) and returns, once
	// they all show stopped, when it was sent.
	Stop(ctx context.Context) (time.Time, error)
	// Continue resumes a stopped target and returns once it runs. It is
	// also how a stall ends when the run does, so it must not give up
	// because ctx was cancelled before it was called.
	Continue(ctx context.Context) error
	// Kill ends the target at once and brings it back on the same
	// addresses, returning when it is ready again. signalled (if set) is
	// called as soon as the kill was sent, with its error.
	Kill(ctx context.Context, signalled func(at time.Time, err error)) (readyAt time.Time, err error)
	// Terminate ends the target gracefully and leaves it down; signalled
	// as for Kill. It returns once it is gone.
	Terminate(ctx context.Context, signalled func(at time.Time, err error)) error
	// Restore brings a terminated target back and returns when it is ready.
	Restore(ctx context.Context) (readyAt time.Time, err error)
}

// ErrNotTaken is in the chain of a Target's error when the action failed
// in the cluster's own means (an attach file's command, a signal to an
// engine p2pfault did not start) rather than in p2pfault: a scripted run
// says so and goes on, and the checks judge the fault that did not happen
// (its window stays empty). Mark an error with NotTaken.
var ErrNotTaken = errors.New("the cluster did not take the fault action")

// NotTaken marks err as ErrNotTaken, keeping err's own chain (errors.Is
// and errors.As reach both); nil stays nil.
func NotTaken(err error) error {
	if err == nil {
		return nil
	}
	return notTaken{err}
}

type notTaken struct{ err error }

func (e notTaken) Error() string   { return e.err.Error() }
func (e notTaken) Unwrap() []error { return []error{e.err, ErrNotTaken} }
