package experiment

import (
	"context"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/probe"
)

// lifecycle is the run's course: when it started, its context, its t0
// (zero until warm-up ends), its phase, and the cluster and the probe once
// they are made. Its lock guards these fields only: it is held for a read
// or a write, never across a call out of the type, so a fault or a face
// that asks for one of them never waits on anything else.
type lifecycle struct {
	mu    sync.Mutex
	start time.Time
	ctx   context.Context
	fail  context.CancelCauseFunc
	lined bool      // arrived at (or left) the start line
	zero  time.Time // t0
	phase event.Phase
	cl    Cluster
	pr    *probe.Prober
}

// begin is Run's start: the run's context and how to fail it.
func (l *lifecycle) begin(ctx context.Context, fail context.CancelCauseFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start = time.Now()
	l.ctx, l.fail = ctx, fail
}

// started is when Run began (zero before).
func (l *lifecycle) started() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// context is the run's context; it ends with the run.
func (l *lifecycle) context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx
}

// failWith ends the run with err as its cause (a goroutine's panic, a
// restart that never came up).
func (l *lifecycle) failWith(err error) {
	l.mu.Lock()
	fail := l.fail
	l.mu.Unlock()
	fail(err)
}

// line marks the run arrived at (or left) the start line and says whether
// it had been already.
func (l *lifecycle) line() (was bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	was, l.lined = l.lined, true
	return was
}

func (l *lifecycle) setT0(t0 time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.zero = t0
}

// t0 is the measured run's start (zero until warm-up ends).
func (l *lifecycle) t0() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.zero
}

// rel is at as a time since t0 (0 before warm-up ends).
func (l *lifecycle) rel(at time.Time) time.Duration {
	t0 := l.t0()
	if t0.IsZero() || at.IsZero() {
		return 0
	}
	return at.Sub(t0)
}

// since is the time since t0 (0 before warm-up ends).
func (l *lifecycle) since() time.Duration {
	t0 := l.t0()
	if t0.IsZero() {
		return 0
	}
	return time.Since(t0)
}

// setPhase moves the run to phase p and says whether it changed.
func (l *lifecycle) setPhase(p event.Phase) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	same := l.phase == p
	l.phase = p
	return !same
}

func (l *lifecycle) setCluster(cl Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cl = cl
}

// cluster is the run's cluster once it is open (nil before).
func (l *lifecycle) cluster() Cluster {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cl
}

func (l *lifecycle) setProber(pr *probe.Prober) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pr = pr
}

// prober is the run's probe once it is made (nil before).
func (l *lifecycle) prober() *probe.Prober {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pr
}
