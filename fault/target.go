package fault

import (
	"context"
	"time"
)

// Target is what fault kinds act on: one engine, however it is reached.
// The runner's launched engines are one implementation (runner.Target);
// an engine p2pfault did not start is another. Errors say what went wrong
// without the target's name: the kinds add it.
type Target interface {
	Name() string
	// Stop stops every process of the target (SIGSTOP) and returns, once
	// they all show stopped, when it was sent.
	Stop() (time.Time, error)
	// Continue resumes a stopped target and returns once it runs.
	Continue() error
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
