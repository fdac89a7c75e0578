package ui

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/charmbracelet/x/term"
	"golang.org/x/sys/unix"

	"p2pfault/exitcode"
)

// errTerminalClosed ends the dashboard whose terminal hung up: the same
// interruption as the SIGHUP that usually comes with it (exit 130).
var errTerminalClosed = fmt.Errorf("%w: the terminal closed", exitcode.ErrInterrupted)

// untilHangup returns a context that ends, with errTerminalClosed as its
// cause, when the terminal on f hangs up (the terminal window or the tmux
// pane closed, the SSH session dropped). The SIGHUP the kernel sends goes
// to the session's leader, which may not pass it on (a shell that traps
// it, a wrapper); and bubbletea takes the end of its input for a quiet
// end of keys, so without this the dashboard would go on running, faults
// held, with no one to see it. stop ends the watch.
func untilHangup(ctx context.Context, f *os.File) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if f == nil || !term.IsTerminal(f.Fd()) {
		return ctx, func() { cancel(nil) }
	}
	fd := int32(f.Fd())
	var wg sync.WaitGroup
	wg.Go(func() {
		// poll with no events asked reports only a hangup or an error;
		// a half-second timeout lets the watch see ctx end.
		pfd := []unix.PollFd{{Fd: fd}}
		for ctx.Err() == nil {
			n, err := unix.Poll(pfd, 500)
			if err == nil && n > 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				cancel(errTerminalClosed)
				return
			}
		}
	})
	return ctx, func() {
		cancel(nil)
		wg.Wait()
	}
}
