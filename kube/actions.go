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
	return t.c.ex.procs(ctx, t.c.cfg.Namespace, t.pod, t.container)
}

func (t *Target) signal(ctx context.Context, sig string, ps []proc) error {
	return t.c.ex.signal(ctx, t.c.cfg.Namespace, t.pod, t.container, sig, ps)
}

// Stop stops every process of the engine by exec (kill -STOP from inside
// the container), after marking the pod stalled (so a sweep resumes it if
// p2pfault dies), and returns once every one shows stopped. An engine
// that is its container's PID 1 is refused (procs.go: initRefusal).
func (t *Target) Stop(ctx context.Context) (time.Time, error) {
	ps, err := t.procs(ctx)
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	if ps.engineIsInit() {
		return time.Time{}, fault.NotTaken(ps.initRefusal("SIGSTOP"))
	}
	if err := t.c.book.add(Record{Kind: "Pod", Namespace: t.c.cfg.Namespace, Name: t.pod, Label: LabelStalled}); err != nil {
		return time.Time{}, err
	}
	if err := mark(ctx, t.c.cs, t.c.cfg.Namespace, t.pod, LabelStalled, t.c.cfg.Run); err != nil {
		return time.Time{}, fault.NotTaken(fmt.Errorf("label pod %s %s: %w", t.pod, LabelStalled, err))
	}
	t.mu.Lock()
	t.stalled = true
	t.mu.Unlock()
	at := time.Now()
	if err := t.signal(ctx, "STOP", ps.engine()); err != nil {
		t.Continue(ctx)
		return time.Time{}, fault.NotTaken(err)
	}
	for {
		now, err := t.procs(ctx)
		if err == nil {
			if _, running := now.stopped(); len(running) == 0 {
				return at, nil
			}
		}
		select {
		case <-ctx.Done():
			t.Continue(ctx)
			return time.Time{}, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
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
	return unmark(ctx, t.c.cs, t.c.cfg.Namespace, t.pod, LabelStalled)
}

// Kill kills every process of the engine by exec (kill -KILL from inside
// the container): its init restarts it in place (same pod, same address;
// with tini as init the container ends and the kubelet restarts it,
// restart count +1). It returns once the engine answers /health again
// with new processes. PID 1 engines are refused, as for Stop.
func (t *Target) Kill(ctx context.Context, signalled func(at time.Time, err error)) (time.Time, error) {
	ps, err := t.procs(ctx)
	if err == nil && ps.engineIsInit() {
		err = ps.initRefusal("SIGKILL")
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
	old, restarts := ps.engine()[0].pid, t.containerRestarts(ctx)
	for {
		// A new container may give its engine the old pid again: its
		// restart count says it is new.
		now, err := t.procs(ctx)
		renewed := err == nil && len(now.engine()) > 0 && (now.engine()[0].pid != old || t.containerRestarts(ctx) > restarts)
		if renewed && t.ready(ctx) == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// containerRestarts is the engine container's restart count now (-1
// when the pod cannot be read).
func (t *Target) containerRestarts(ctx context.Context) int {
	p, err := t.c.cs.CoreV1().Pods(t.c.cfg.Namespace).Get(ctx, t.pod, metav1.GetOptions{})
	if err != nil {
		return -1
	}
	return restartsOf(*p, t.container)
}

var errRefused = errors.New("not supported on --kube yet: a pod's controller decides whether a deleted pod comes back, and where")

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
		r.Instance = t.restarts + t.seen
		return r
	}
	eng := ps.engine()
	r.Running = len(eng) > 0 || !ps.engineIsInit()
	if len(eng) > 0 && eng[0].pid != t.lastMain {
		if t.lastMain != 0 {
			t.seen++
		}
		t.lastMain = eng[0].pid
	}
	r.Instance = t.restarts + t.seen
	st, run := ps.stopped()
	r.Frozen, r.Listed = len(st) > 0 && len(run) == 0, true
	for _, p := range eng {
		r.Procs = append(r.Procs, fault.Proc{Name: fmt.Sprintf("%d (%s)", p.pid, p.comm), Frozen: p.state == "T" || p.state == "t"})
	}
	return r
}
