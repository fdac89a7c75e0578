package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
)

// endSignals are the signals that end a run the way Ctrl-C does: the host
// state it changed is undone, its reports written, exit 130. Each is what
// a way out people hit sends: Ctrl-C (SIGINT), kill or systemd (SIGTERM),
// a closed terminal, a dropped SSH session or a killed tmux pane (SIGHUP),
// Ctrl-\ (SIGQUIT; Go's default would dump goroutines and leave the host
// as the run had changed it).
var endSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalWhy says, for the message, what usually sends each signal.
var signalWhy = map[os.Signal]string{
	os.Interrupt:    "Ctrl-C",
	syscall.SIGTERM: "kill or a service manager",
	syscall.SIGHUP:  "the terminal closed",
	syscall.SIGQUIT: "Ctrl-\\",
}

// notifySignals cancels the returned context, with an interruption naming
// the signal as its cause, on the first of endSignals. Later ones are
// ignored: a second Ctrl-C must not cut the undo short (SIGKILL still
// does; `p2pfault cleanup` is for that). A later SIGQUIT writes every
// goroutine's stack to stderr, what Go's own SIGQUIT does, so an undo
// that hangs can still be looked into; the run goes on winding down.
//
// SIGPIPE is caught too, and dropped. Uncaught, a write to a closed pipe
// on stdout or stderr (`| head`, `| grep -m1`) kills the process at once,
// leaving stopped engines and firewall tables behind; caught, that write
// fails with EPIPE, which outputWatch turns into the end of the run. A
// SIGPIPE of any other write (a socket to an engine that died) is what Go
// ignores anyway: its write fails and the code that made it says so.
func notifySignals(parent context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, endSignals...)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGQUIT && ctx.Err() != nil {
					dumpStacks(stderr)
				}
				cancel(signalCause(s))
			case <-pipes:
			case <-done:
				return
			}
		}
	})
	return ctx, func() {
		signal.Stop(sigs)
		signal.Stop(pipes)
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// dumpStacks writes every goroutine's stack to w.
func dumpStacks(w io.Writer) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			_, _ = w.Write(buf[:n])
			return
		}
		buf = make([]byte, 2*len(buf))
	}
}

// signalCause is the interruption a signal causes: exit 130, and a
// message naming the signal, e.g. "interrupted by SIGHUP (the terminal
// closed)".
func signalCause(s os.Signal) error {
	name := s.String()
	if ss, ok := s.(syscall.Signal); ok {
		name = signalName(ss)
	}
	return fmt.Errorf("%w by %s (%s)", exitcode.ErrInterrupted, name, signalWhy[s])
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return s.String()
}

// interruption is the error an interrupted command ends with: the cause
// of ctx when it is an interruption (it names the signal), else the plain
// one.
func interruption(ctx context.Context) error {
	if c := context.Cause(ctx); errors.Is(c, exitcode.ErrInterrupted) {
		return c
	}
	return exitcode.ErrInterrupted
}

// watchOutput makes the first failed write on cmd's stdout or stderr end
// the run (cancel, with a cause naming the stream and the error): the
// reader is gone (`| grep -m1` matched, a closed terminal), so a run that
// went on would print into nothing and hold its faults until it ended by
// itself. A run, not every command: `cleanup | head` must still undo
// everything it was asked to.
func watchOutput(cmd *cobra.Command, cancel context.CancelCauseFunc) {
	cmd.SetOut(&outputWatch{w: cmd.OutOrStdout(), name: "stdout", lost: cancel})
	cmd.SetErr(&outputWatch{w: cmd.ErrOrStderr(), name: "stderr", lost: cancel})
}

// outputWatch is a writer that reports its first failure and then writes
// nothing more: each write to a closed pipe would fail again.
type outputWatch struct {
	w    io.Writer
	name string
	lost context.CancelCauseFunc

	mu  sync.Mutex
	err error
}

func (o *outputWatch) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
		o.lost(fmt.Errorf("%w: %s closed (%v)", exitcode.ErrInterrupted, o.name, err))
	}
	return n, err
}
