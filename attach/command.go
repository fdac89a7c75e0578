package attach

import (
	"context"
	"fmt"
	"strings"
	"time"

	"p2pfault/attach/guard"
	"p2pfault/fault"
)

// commandFaulter faults a source through the file's commands (kubectl,
// ssh), run without a shell.
type commandFaulter struct {
	t     *Target
	guard *guard.Guard // the guard of the stall in force
	stall bool
	gone  bool
}

func (f *commandFaulter) stalled() bool { return f.stall }
func (f *commandFaulter) removed() bool { return f.gone }

// run runs the source's command for a. Its result carries the filled-in
// argv, exit status and output either way.
func (f *commandFaulter) run(ctx context.Context, a string) (Result, error) {
	argv, ok := f.t.src.Faults.Commands[a]
	if !ok {
		return Result{}, fmt.Errorf("the attach file gives no %s command for this source", a)
	}
	src := f.t.Source()
	filled := src.Fill(argv)
	out, code, err := guard.RunCommand(ctx, filled, f.t.opts.CommandTimeout)
	r := Result{Argv: filled, ExitCode: code, Output: out, At: time.Now()}
	if err != nil {
		msg := strings.TrimSpace(out)
		if len(msg) > 500 {
			msg = "…" + msg[len(msg)-500:]
		}
		if msg != "" {
			msg = ": " + msg
		}
		return r, fmt.Errorf("%q %w%s", filled, err, msg)
	}
	return r, nil
}

func (f *commandFaulter) doResume(ctx context.Context) (Result, error) {
	if !f.stall {
		return Result{}, errNotStalled
	}
	r, err := f.run(ctx, fault.ActionResume)
	if err != nil {
		return r, err // the guard stays: it retries when p2pfault ends
	}
	f.stall = false
	f.unguard()
	return r, nil
}

func (f *commandFaulter) doKill(ctx context.Context) (Result, error) {
	return f.run(ctx, fault.ActionKill)
}

// doReplace runs the replace command, which ends the source's engine and
// starts a new one on new ports, and reads where the new one answers from
// its output (ParseAddress); Target.Replace moves the source there.
func (f *commandFaulter) doReplace(ctx context.Context) (Result, error) {
	r, err := f.run(ctx, fault.ActionReplace)
	if err != nil {
		return r, err
	}
	scheme, _, _ := strings.Cut(f.t.Source().URL, "://")
	a, err := ParseAddress(r.Output, scheme)
	if err != nil {
		return r, fmt.Errorf("%q: %w", r.Argv, err)
	}
	r.Moved = &a
	return r, nil
}

func (f *commandFaulter) doRemove(ctx context.Context) (Result, error) {
	r, err := f.run(ctx, fault.ActionRemove)
	if err == nil {
		f.gone = true
	}
	return r, err
}

func (f *commandFaulter) doRestore(ctx context.Context) (Result, error) {
	if !f.gone {
		return Result{}, errNotRemoved
	}
	r, err := f.run(ctx, fault.ActionRestore)
	if err == nil {
		f.gone = false
	}
	return r, err
}

// readyWait runs the ready command, if any, then waits for /health; it
// touches no state, so it runs without the target's lock.
func (f *commandFaulter) readyWait() func(context.Context) (Result, error) {
	return func(ctx context.Context) (Result, error) {
		var r Result
		if _, ok := f.t.src.Faults.Commands[fault.ActionReady]; ok {
			var err error
			if r, err = f.run(ctx, fault.ActionReady); err != nil {
				return r, err
			}
		}
		at, err := waitHealthy(ctx, f.t.opts, f.t.Source().URL, nil)
		r.At = at
		return r, err
	}
}

func (f *commandFaulter) doStall(ctx context.Context) (Result, error) {
	src := f.t.Source()
	resume := src.Fill(f.t.src.Faults.Commands[fault.ActionResume])
	o := f.t.opts
	if o.Guard != nil {
		g, err := guard.Start(guard.Config{
			Argv: o.Guard, Env: o.GuardEnv, Log: f.t.guardLog(),
			Source: f.t.src.Name, Resume: resume, ResumeTimeout: o.CommandTimeout,
		})
		if err != nil {
			return Result{}, err
		}
		f.guard = g
	}
	if o.Book != nil {
		rec := guard.Stall{Source: f.t.src.Name, Resume: resume}
		if f.guard != nil {
			rec.Guard = f.guard.ID()
		}
		if err := o.Book.Add(rec); err != nil {
			f.unguard()
			return Result{}, err
		}
	}
	r, err := f.run(ctx, fault.ActionStall)
	if err != nil {
		// A stall command that failed may have stopped part of the
		// source: resume, best effort, and report the stall's failure.
		_, _ = f.run(ctx, fault.ActionResume)
		f.unguard()
		return r, err
	}
	f.stall = true
	return r, nil
}

func (f *commandFaulter) unguard() {
	if f.guard != nil {
		_ = f.guard.Release()
		f.guard = nil
	}
	if f.t.opts.Book != nil {
		_ = f.t.opts.Book.Remove(f.t.src.Name)
	}
}
