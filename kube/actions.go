package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"p2pfault/fault"
)

// pollEvery is how often an action reads the container again while it
// waits for its effect.
const pollEvery = 200 * time.Millisecond

// actionTimeout bounds an undo (resume) that must not end with the run.
const actionTimeout = 30 * time.Second

// procs reads the engine's container now.
func (t *Target) procs(ctx context.Context) (procs, error) {
	return t.c.ex.procs(ctx, t.c.cfg.Namespace, t.where().pod, t.where().container)
}

func (t *Target) signal(ctx context.Context, sig string, ps []proc) error {
	return t.c.ex.signal(ctx, t.c.cfg.Namespace, t.where().pod, t.where().container, sig, ps)
}

// stopWithin bounds a stall's wait for every process of the engine to
// show stopped; past it the stall is undone and not taken, naming what
// still ran. killReadyWithin bounds a kill's wait for the engine to
// answer again: vLLM loads its model again after a kill, as the launched
// and attached clusters allow (runner.DefaultVLLMReadyTimeout).
const (
	stopWithin      = 10 * time.Second
	killReadyWithin = 20 * time.Minute
)

// Stop stops every process of the engine by exec (SIGSTOP from inside
// the container), after marking the pod stalled (so a sweep resumes it if
// p2pfault dies), and returns once every one shows stopped. Each round
// reads the container again and stops what still runs: a process forked
// between a read and the signal (a core its front end was starting) is
// stopped on the next. A stall that is not whole within stopWithin, or
// whose ctx ends, is undone before Stop returns: never a partial stall
// left behind. An engine that is its container's PID 1 is refused
// (procs.go: initRefusal).
func (t *Target) Stop(ctx context.Context) (time.Time, error) {
	ps, err := t.procs(ctx)
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	if err := ps.signallable("SIGSTOP"); err != nil {
		return time.Time{}, fault.NotTaken(fmt.Errorf("pod %s: %w", t.where().pod, err))
	}
	if err := t.c.book.add(Record{Kind: "Pod", Namespace: t.c.cfg.Namespace, Name: t.where().pod, Label: LabelStalled}); err != nil {
		return time.Time{}, err
	}
	if err := mark(ctx, t.c.cs, t.c.cfg.Namespace, t.where().pod, LabelStalled, t.c.cfg.Run); err != nil {
		return time.Time{}, fault.NotTaken(fmt.Errorf("label pod %s %s: %w", t.where().pod, LabelStalled, err))
	}
	t.mu.Lock()
	t.stalled = true
	t.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, stopWithin)
	defer cancel()
	at := time.Now()
	err = t.stopAll(wctx, ps)
	if err == nil {
		return at, nil
	}
	if uerr := t.Continue(ctx); uerr != nil {
		err = fmt.Errorf("%w; and the resume after it: %v", err, uerr)
	}
	if ctx.Err() != nil {
		return time.Time{}, fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return time.Time{}, fault.NotTaken(err)
}

// stopAll sends SIGSTOP to what runs of ps, reads the container again,
// and so on until nothing of the engine runs or ctx ends.
func (t *Target) stopAll(ctx context.Context, ps procs) error {
	for {
		_, running := ps.stopped()
		if !ps.alive() {
			// Zombies alone are not a stalled engine: its init reaps them
			// and starts another, which would run.
			return fmt.Errorf("pod %s: the engine has no live process left to stop (it exited or is restarting): %s", t.where().pod, ps.describe())
		}
		if len(running) == 0 {
			return nil
		}
		if err := t.signal(ctx, "STOP", running); err != nil {
			return err
		}
		now, err := t.procs(ctx)
		for err != nil || !settled(now) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("pod %s: not every process of the engine stopped within %s: %s", t.where().pod, stopWithin, describeOr(now, err))
			case <-time.After(pollEvery):
			}
			now, err = t.procs(ctx)
		}
		ps = now
	}
}

// settled: no process of ps is between a signal and its effect (a
// process in uninterruptible sleep takes SIGSTOP when it wakes), so what
// runs now runs and is worth another signal.
func settled(ps procs) bool {
	for _, p := range ps.engine() {
		if p.state == "D" {
			return false
		}
	}
	return true
}

func describeOr(ps procs, err error) string {
	if err != nil {
		return err.Error()
	}
	return ps.describe()
}

// Continue resumes every stopped process of the engine and removes the
// pod's stalled mark; it does not give up when ctx was cancelled.
func (t *Target) Continue(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), actionTimeout)
	defer cancel()
	ps, err := t.procs(ctx)
	if err != nil {
		return fault.NotTaken(err)
	}
	if st, _ := ps.stopped(); len(st) > 0 {
		if err := t.signal(ctx, "CONT", st); err != nil {
			return fault.NotTaken(err)
		}
	}
	t.mu.Lock()
	t.stalled = false
	t.mu.Unlock()
	return unmark(ctx, t.c.cs, t.c.cfg.Namespace, t.where().pod, LabelStalled)
}

// Kill kills every process of the engine by exec (SIGKILL from inside the
// container): its init restarts it in place (same pod, same address; with
// tini as init the container ends and the kubelet restarts it, restart
// count +1). It returns once the engine answers /health again with none
// of its old processes left, or its container restarted, within
// killReadyWithin. PID 1 engines are refused, as for Stop.
func (t *Target) Kill(ctx context.Context, signalled func(at time.Time, err error)) (time.Time, error) {
	restarts := t.containerRestarts(ctx)
	ps, err := t.procs(ctx)
	if err == nil {
		if err = ps.signallable("SIGKILL"); err != nil {
			err = fmt.Errorf("pod %s: %w", t.where().pod, err)
		}
	}
	if err == nil {
		err = t.signal(ctx, "KILL", ps.engine())
	}
	if signalled != nil {
		signalled(time.Now(), err)
	}
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	ctx, cancel := context.WithTimeout(ctx, killReadyWithin)
	defer cancel()
	for {
		if t.renewed(ctx, ps, restarts) && t.ready(ctx) == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("pod %s: the engine did not answer again within %s of its kill: %w", t.where().pod, killReadyWithin, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// renewed says whether the engine is a new one since old was read: none
// of old's processes is left (a pid may come back, its starttime not), or
// the container's restart count grew past restarts (-1: not known).
func (t *Target) renewed(ctx context.Context, old procs, restarts int) bool {
	if restarts >= 0 && t.containerRestarts(ctx) > restarts {
		return true
	}
	now, err := t.procs(ctx)
	if err != nil || !now.alive() {
		return false
	}
	for _, p := range old.engine() {
		if now.has(p) {
			return false
		}
	}
	return true
}

// containerRestarts is the engine container's restart count now (-1
// when the pod cannot be read).
func (t *Target) containerRestarts(ctx context.Context) int {
	p, err := t.c.cs.CoreV1().Pods(t.c.cfg.Namespace).Get(ctx, t.where().pod, metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return restartsOf(*p, t.where().container)
}

// errRefused: a pod's controller brings a deleted pod back (that is
// replace), and holding an engine down would mean scaling its controller,
// a change to the user's workload p2pfault does not make.
var errRefused = errors.New("not supported on --kube: a deleted pod comes back by its controller (that is replace), and keeping it down would mean scaling the controller, which p2pfault does not change")

// Terminate and Restore (remove, restore) are refused: Plan says so first.
func (t *Target) Terminate(context.Context, func(time.Time, error)) error {
	return fault.NotTaken(errRefused)
}

func (t *Target) Restore(context.Context) (time.Time, error) {
	return time.Time{}, fault.NotTaken(errRefused)
}

// Report is what the container shows now (read by exec): the stall and
// kill kinds' verification. Instance counts the engine's restarts: the
// container's restart count plus the in-place restarts seen (its first
// process replaced).
func (t *Target) Report() fault.Report {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps, err := t.procs(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	r := fault.Report{Ready: t.ready, Addrs: []string{t.HTTPURL()[len("http://"):], t.P2PAddr()}, Cut: t.c.cuts.of(t.name)}
	if err != nil {
		r.Instance = t.instance()
		return r
	}
	eng := ps.engine()
	r.Running = len(eng) > 0 || ps.engineIsInit()
	if len(eng) > 0 && eng[0].pid != t.lastMain {
		if t.lastMain != 0 {
			t.seen++
		}
		t.lastMain = eng[0].pid
	}
	r.Instance = t.instance()
	st, run := ps.stopped()
	r.Frozen, r.Listed = len(st) > 0 && len(run) == 0, true
	for _, p := range eng {
		if p.state == "Z" || p.state == "X" {
			continue // exited: neither stopped nor running
		}
		r.Procs = append(r.Procs, fault.Proc{Name: fmt.Sprintf("%d (%s)", p.pid, p.comm), Frozen: p.state == "T" || p.state == "t"})
	}
	return r
}
