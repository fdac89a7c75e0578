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
	// stallOn is the grain of the stall in force (its resume command is
	// filled for it), and stallName its name in the record.
	stallOn   fault.Grain
	stallName string
	gone      bool
}

func (f *commandFaulter) stalled() bool           { return f.stall }
func (f *commandFaulter) stallGrain() fault.Grain { return f.stallOn }
func (f *commandFaulter) removed() bool           { return f.gone }

// run runs the source's command for a, filled for grain g. Its result
// carries the filled-in argv, exit status and output either way.
func (f *commandFaulter) run(ctx context.Context, a string, g fault.Grain) (Result, error) {
	argv, ok := f.t.src.Faults.Commands[a]
	if !ok {
		return Result{}, fmt.Errorf("the attach file gives no %s command for this source", a)
	}
	src := f.t.Source()
	filled := src.Fill(argv, g)
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

// doResume resumes the stall in force: the resume command of its grain.
func (f *commandFaulter) doResume(ctx context.Context, _ fault.Grain) (Result, error) {
	if !f.stall {
		return Result{}, errNotStalled
	}
	r, err := f.run(ctx, fault.ActionResume, f.stallOn)
	if err != nil {
		return r, err // the guard stays: it retries when p2pfault ends
	}
	f.stall = false
	f.unguard()
	return r, nil
}

func (f *commandFaulter) doKill(ctx context.Context, g fault.Grain) (Result, error) {
	return f.run(ctx, fault.ActionKill, g)
}

// doReplace runs the replace command, which ends the source's engine and
// starts a new one on new ports, and reads where the new one answers from
// its output (ParseAddress); Target.Replace moves the source there.
func (f *commandFaulter) doReplace(ctx context.Context, g fault.Grain) (Result, error) {
	r, err := f.run(ctx, fault.ActionReplace, g)
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

func (f *commandFaulter) doRemove(ctx context.Context, g fault.Grain) (Result, error) {
	r, err := f.run(ctx, fault.ActionRemove, g)
	if err == nil {
		f.gone = true
	}
	return r, err
}

func (f *commandFaulter) doRestore(ctx context.Context, _ fault.Grain) (Result, error) {
	if !f.gone {
		return Result{}, errNotRemoved
	}
	r, err := f.run(ctx, fault.ActionRestore, fault.Grain{})
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
			if r, err = f.run(ctx, fault.ActionReady, fault.Grain{}); err != nil {
				return r, err
			}
		}
		at, err := waitHealthy(ctx, f.t.opts, f.t.Source().URL, nil)
		r.At = at
		return r, err
	}
}

func (f *commandFaulter) doStall(ctx context.Context, g fault.Grain) (Result, error) {
	src := f.t.Source()
	resume := src.Fill(f.t.src.Faults.Commands[fault.ActionResume], g)
	name := f.t.src.Name
	if g.OnRank {
		name = rankName(name, g.Rank)
	}
	o := f.t.opts
	if o.Guard != nil {
		gd, err := guard.Start(guard.Config{
			Argv: o.Guard, Env: o.GuardEnv, Log: f.t.guardLog(),
			Source: name, Resume: resume, ResumeTimeout: o.CommandTimeout,
		})
		if err != nil {
			return Result{}, err
		}
		f.guard = gd
	}
	f.stallName = name
	if o.Book != nil {
		rec := guard.Stall{Source: name, Resume: resume}
		if f.guard != nil {
			rec.Guard = f.guard.ID()
		}
		if err := o.Book.Add(rec); err != nil {
			f.unguard()
			return Result{}, err
		}
	}
	r, err := f.run(ctx, fault.ActionStall, g)
	if err != nil {
		// A stall command that failed may have stopped part of the
		// source: resume, best effort, and report the stall's failure.
		_, _ = f.run(ctx, fault.ActionResume, g)
		f.unguard()
		return r, err
	}
	f.stall, f.stallOn = true, g
	return r, nil
}

func (f *commandFaulter) unguard() {
	if f.guard != nil {
		_ = f.guard.Release()
		f.guard = nil
	}
	if f.t.opts.Book != nil {
		_ = f.t.opts.Book.Remove(f.stallName)
	}
}
