package verify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// The network faults' effects, as seen from p2pfault's side of the link.

// ErrNotPartitioned is wrapped by Partitioned's error when a connect
// completed or was refused instead of hanging.
var ErrNotPartitioned = errors.New("partition not in effect")

// Partitioned confirms from p2pfault's side that addr (a source's P2P
// address) is cut off: a TCP connect to it must hang for wait instead of
// completing (or being refused, which means a reset came back). It returns
// nil when the connect timed out. It dials through v.Dial (the OS's
// network when nil).
func (v Verifier) Partitioned(ctx context.Context, addr string, wait time.Duration) error {
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	c, err := v.dial()(dctx, "tcp", addr)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: a connect to %s completed in %s", ErrNotPartitioned, addr, time.Since(start).Round(time.Millisecond))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("verify partition of %s: %w", addr, ctx.Err())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("%w: a connect to %s was refused (a reset came back): %v", ErrNotPartitioned, addr, err)
	}
	return fmt.Errorf("%w: a connect to %s failed at once instead of hanging: %v", ErrNotPartitioned, addr, err)
}

// Reachable reports whether a TCP connect to addr completes within wait
// (a healed partition answers again), dialled through v.Dial (the OS's
// network when nil).
func (v Verifier) Reachable(ctx context.Context, addr string, wait time.Duration) error {
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c, err := v.dial()(dctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}
