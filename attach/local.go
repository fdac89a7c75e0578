package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/attach/guard"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/runner/session"
	"p2pfault/safefile"
)

// localFaulter faults a source on this host through its session: the
// session of the process listening on the source's P2P port, found again
// for every action (an engine restarted by someone else has a new one).
type localFaulter struct {
	t       *Target
	stall   *localStall
	gone    *launch   // set by remove: how to restore
	started *relaunch // the last engine p2pfault started for this source
}

type localStall struct {
	sid     int
	members []session.Proc
	guard   *guard.Guard
	// name is the stall's in the record and the guard's log: the source's,
	// or one rank's ("pod-a/rank1"), whose members alone were stopped
	// (part) and are resumed alone.
	name  string
	part  bool
	grain fault.Grain // what the stall was made on
}

// relaunch is an engine p2pfault started again; it is reaped by a
// goroutine so that an engine that dies during the run leaves no zombie.
type relaunch struct {
	pid  int
	log  string
	done chan struct{}
	err  error
}

func (f *localFaulter) stalled() bool { return f.stall != nil }

func (f *localFaulter) stallGrain() fault.Grain {
	if f.stall == nil {
		return fault.Grain{}
	}
	return f.stall.grain
}
func (f *localFaulter) removed() bool { return f.gone != nil }

// find returns the source's session now, checked against the guards.
func (f *localFaulter) find() (Listener, error) {
	s := f.t.src
	l, err := FindListener(s.P2PHost, s.P2PPort)
	if err != nil {
		return l, fmt.Errorf("find the process on P2P address %s: %w", s.P2P, err)
	}
	if err := ownSession(l); err != nil {
		return l, fmt.Errorf("pid %d (%s) on P2P address %s: %w", l.Pid, l.Comm, s.P2P, err)
	}
	return l, nil
}

// cmdlines are the command lines of ms for the stall record: cleanup
// resumes only processes that /proc shows are still these.
func cmdlines(ms []session.Proc) runner.Cmdlines {
	var pids []int
	for _, p := range ms {
		pids = append(pids, p.Pid)
	}
	return runner.ReadCmdlines(pids...)
}

func ids(ms []session.Proc) []runner.ProcID {
	var out []runner.ProcID
	for _, p := range ms {
		if p.Live() {
			out = append(out, runner.ProcID{Pid: p.Pid, StartTicks: p.StartTicks})
		}
	}
	return out
}

func (f *localFaulter) doStall(ctx context.Context, g fault.Grain) (Result, error) {
	l, err := f.find()
	if err != nil {
		return Result{}, err
	}
	st := &localStall{sid: l.Sid, name: f.t.src.Name, part: g.OnRank, grain: g}
	if g.OnRank {
		st.members, err = f.rank(l, g.Rank)
		st.name = rankName(st.name, g.Rank)
	} else {
		st.members, err = session.Members(l.Sid)
	}
	if err != nil {
		return Result{Sid: l.Sid}, err
	}
	ms := st.members
	// Recorded and guarded before the signal: from SIGSTOP on, every way
	// out of p2pfault resumes the session (or the rank's processes).
	o := f.t.opts
	if o.Guard != nil {
		st.guard, err = guard.Start(guard.Config{
			Argv: o.Guard, Env: o.GuardEnv, Log: f.t.guardLog(),
			Source: st.name, Sid: l.Sid, Members: ids(ms), Part: st.part,
		})
		if err != nil {
			return Result{Sid: l.Sid}, err
		}
	}
	if o.Book != nil {
		rec := guard.Stall{Source: st.name, Sid: l.Sid, Members: ids(ms), Part: st.part, Cmdlines: cmdlines(ms)}
		if st.guard != nil {
			rec.Guard = st.guard.ID()
		}
		if err := o.Book.Add(rec); err != nil {
			f.unguard(st)
			return Result{Sid: l.Sid}, err
		}
	}
	at, sent, err := session.Stop(ctx, l.Sid, ms)
	if err != nil {
		f.unguard(st)
		return Result{Sid: l.Sid, Pids: sent, At: at}, err
	}
	f.stall = st
	return Result{Sid: l.Sid, Pids: sent, At: at}, nil
}

// unguard releases the stall's guard and drops its record.
func (f *localFaulter) unguard(st *localStall) {
	if st.guard != nil {
		_ = st.guard.Release()
	}
	if f.t.opts.Book != nil {
		_ = f.t.opts.Book.Remove(st.name)
	}
}

// doResume resumes the stall in force, whatever grain it was made on.
func (f *localFaulter) doResume(ctx context.Context, _ fault.Grain) (Result, error) {
	st := f.stall
	if st == nil {
		return Result{}, errNotStalled
	}
	at := time.Now()
	sent, err := guard.Continue(st.sid, ids(st.members), st.part)
	if err != nil {
		// Keep the stall, its guard and its record: the session may still
		// be stopped, and Close or the guard will try again.
		return Result{Sid: st.sid}, err
	}
	f.stall = nil
	f.unguard(st)
	err = session.WaitContinued(ctx, sent)
	return Result{Sid: st.sid, Pids: sent, At: at}, err
}

// localKillWait bounds the wait for a local source's session to empty
// after SIGKILL.
const localKillWait = 10 * time.Second

// endSession ends sid with first (SIGKILL, or SIGTERM with a grace before
// SIGKILL) and waits until no process of it is left: the runner's
// escalation (session.Drain), after a first signal sent to the members
// read here so that the pids it reached are reported.
func (f *localFaulter) endSession(ctx context.Context, sid int, first unix.Signal) ([]int, time.Time, error) {
	ms, err := session.Members(sid)
	if err != nil {
		return nil, time.Time{}, err
	}
	at := time.Now()
	sent, err := session.SignalMembers(sid, ms, first)
	switch {
	case errors.Is(err, session.ErrNoMembers):
		return nil, at, nil // already gone (its front end ended it when a rank's core died)
	case err != nil:
		return sent, at, err
	}
	var grace time.Duration // SIGKILL: only the wait is left
	if first != unix.SIGKILL {
		// A stopped process acts on SIGTERM only once continued.
		_, _ = session.Signal(sid, unix.SIGCONT)
		grace = f.t.opts.StopGrace
	}
	return sent, at, session.Drain(ctx, sid, grace, localKillWait, nil)
}

// capture finds the source's session and reads how its leader was
// started, before anything is killed.
func (f *localFaulter) capture() (Listener, launch, error) {
	l, err := f.find()
	if err != nil {
		return l, launch{}, err
	}
	lead, err := leader(l)
	if err != nil {
		return l, launch{}, err
	}
	ln, err := readLaunch(lead)
	if err != nil {
		return l, launch{}, fmt.Errorf("read how session %d was started, to restart it: %w", l.Sid, err)
	}
	return l, ln, nil
}

// doKill is the local form of the runner's kill (runner.Target.Kill):
// SIGKILL the session, wait until it is gone, start the engine again. It
// ends the session with the runner's pieces (session.Members,
// SignalMembers, Drain), but it cannot be runner.Engine's restart: that
// restarts an engine p2pfault started, from its Spec, as its child, reaped
// by it and tied to its life (Pdeathsig). A local source was started by
// someone else: it is started again from its leader's /proc command line,
// environment and folder (capture), detached so that it outlives p2pfault
// as the engine it replaces would have (start), and p2pfault cannot reap
// it. For the same reason it cannot be replaced on new ports (actions.go).
func (f *localFaulter) doKill(ctx context.Context, g fault.Grain) (Result, error) {
	ln, r, _, err := f.end(ctx, g, unix.SIGKILL)
	if err != nil {
		return r, err
	}
	rl, err := f.start(ln, "kill")
	if err != nil {
		return r, err
	}
	r.NewPid, r.Log = rl.pid, rl.log
	return r, nil
}

func (f *localFaulter) doRemove(ctx context.Context, g fault.Grain) (Result, error) {
	ln, r, ended, err := f.end(ctx, g, unix.SIGTERM)
	if ended {
		f.gone = &ln
	}
	return r, err
}

// end is a kill's or a removal's end of the source's session, after
// reading how to start it again (capture): sig (SIGKILL, or SIGTERM with
// the grace) to every member, waiting until none is left. On one rank the
// rank's own processes get sig first (rankFirst), and the kill is timed
// from that signal, as a launched engine's rank kill is. ended says
// whether it signalled anything (the source may be partly down even when
// err is set).
func (f *localFaulter) end(ctx context.Context, g fault.Grain, sig unix.Signal) (launch, Result, bool, error) {
	l, ln, err := f.capture()
	if err != nil {
		return ln, Result{}, false, err
	}
	coreAt, core, err := f.rankFirst(l, g, sig)
	if err != nil {
		return ln, Result{Sid: l.Sid, Pids: core, At: coreAt}, len(core) > 0, err
	}
	sent, at, err := f.endSession(ctx, l.Sid, sig)
	if g.OnRank {
		at = coreAt
	}
	pids := append(core, sent...)
	slices.Sort(pids)
	return ln, Result{Sid: l.Sid, Pids: slices.Compact(pids), At: at}, true, err
}

func (f *localFaulter) doRestore(context.Context, fault.Grain) (Result, error) {
	if f.gone == nil {
		return Result{}, errNotRemoved
	}
	rl, err := f.start(*f.gone, "restore")
	if err != nil {
		return Result{}, err
	}
	f.gone = nil
	return Result{NewPid: rl.pid, Log: rl.log}, nil
}

// doReplace: a local source cannot take a replace (Target.cannot refuses
// it before it gets here).
func (*localFaulter) doReplace(context.Context, fault.Grain) (Result, error) {
	return Result{}, errors.New(localReplace)
}

// readyWait returns the wait for the source's /health, holding what it
// needs so that it runs without the target's lock.
func (f *localFaulter) readyWait() func(context.Context) (Result, error) {
	var exited func() error
	rl := f.started
	o, url := f.t.opts, f.t.src.URL
	if rl != nil {
		exited = func() error {
			select {
			case <-rl.done:
				return fmt.Errorf("the engine p2pfault started (pid %d) exited: %v; log %s%s", rl.pid, rl.err, rl.log, tail(rl.log))
			default:
				return nil
			}
		}
	}
	return func(ctx context.Context) (Result, error) {
		at, err := waitHealthy(ctx, o, url, exited)
		r := Result{At: at}
		if rl != nil {
			r.NewPid, r.Log = rl.pid, rl.log
		}
		return r, err
	}
}

// start runs ln again in a new session, detached from p2pfault so that it
// outlives it like the engine it replaces: no death signal, stdin from
// /dev/null, output appended to the source's log in the run's folder.
func (f *localFaulter) start(ln launch, why string) (*relaunch, error) {
	logPath, err := f.t.engineLog()
	if err != nil {
		return nil, err
	}
	out, err := safefile.Append(logPath, safefile.ReportPerm)
	if err != nil {
		return nil, fmt.Errorf("engine log: %w", err)
	}
	defer out.Close()
	fmt.Fprintf(out, "=== p2pfault %s of %s at %s: started again from pid %d's /proc in %s: %s\n",
		why, f.t.src.Name, time.Now().Format(time.RFC3339Nano), ln.Pid, ln.Dir, strings.Join(ln.Argv, " "))
	env := ln.Env
	if env == nil {
		env = []string{} // an engine started with an empty environment; nil would pass p2pfault's
	}
	cmd := &exec.Cmd{Path: ln.Path, Args: ln.Argv, Env: env, Dir: ln.Dir, Stdout: out, Stderr: out}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s again as %q in %s: %w", f.t.src.Name, ln.Argv, ln.Dir, err)
	}
	rl := &relaunch{pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() { rl.err = cmd.Wait(); close(rl.done) }()
	f.started = rl
	return rl, nil
}

// tail is the last lines of a log, for an error.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return ":\n  " + strings.Join(lines, "\n  ")
}
