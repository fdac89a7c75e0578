package session

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Drain makes a session that was asked to end (the caller sent its first
// signal, SIGTERM say) end: it waits up to grace for gone to say the
// session has ended, then SIGKILLs every process left and waits up to
// killWait more. The kernel acts on SIGKILL at once, even for a stopped
// process, so that last wait is not cut short by ctx: a cancelled caller
// still leaves no process behind. grace 0 is for a caller that sent
// SIGKILL itself: only the last wait is left. gone nil is WaitGone.
//
// It is the one escalation of the engines p2pfault ends: the runner's
// (its own engines, and Cleanup's leftovers) and an attached local
// source's.
func Drain(ctx context.Context, sid int, grace, killWait time.Duration, gone func(context.Context) error) error {
	if gone == nil {
		gone = func(ctx context.Context) error { return WaitGone(ctx, sid, 10*time.Millisecond) }
	}
	var sigErr error
	if grace > 0 {
		gctx, cancel := context.WithTimeout(ctx, grace)
		err := gone(gctx)
		cancel()
		if err == nil {
			return nil
		}
		if _, err := Signal(sid, unix.SIGKILL); err != nil && !errors.Is(err, ErrNoMembers) {
			sigErr = err
		}
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	if err := gone(kctx); err != nil {
		return errors.Join(sigErr, err)
	}
	return nil
}
