package vcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/sim"
)

// Target is one engine of the virtual cluster (experiment.Target,
// fault.Target, fault.NetTarget, fault.Replacer, fault.Reporter).
type Target struct {
	c    *Cluster
	pos  int // in c.engines
	tail *tail

	mu       sync.Mutex
	spec     runner.Spec // the command line in force (a replace's new ports)
	hosts    *sim.Hosts  // the engine's processes: the same across a restart on the same ports
	eng      *sim.InProcess
	state    event.State
	instance int // starts of the engine: a restart is a new instance
	restarts int
	started  time.Time
	exit     string
	cuts     map[string]string // the network faults in force, by cut name (the engine's, a rank's): "partition", "loss 30%"
	// recorded is closed once the instance in force has exited and its
	// exit is in state: Stop waits for it, so the run's last reading of
	// the engine's state after Stop says exited.
	recorded chan struct{}
}

var (
	_ experiment.Target = (*Target)(nil)
	_ experiment.Ranked = (*Target)(nil)
	_ fault.NetTarget   = (*Target)(nil)
	_ fault.Replacer    = (*Target)(nil)
	_ fault.Reporter    = (*Target)(nil)
	_ fault.CoreCrasher = (*Target)(nil)
)

func (t *Target) currentSpec() runner.Spec {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spec
}

func (t *Target) Name() string     { return t.currentSpec().Name }
func (t *Target) Role() event.Role { return t.currentSpec().Role }
func (t *Target) Index() int       { return t.currentSpec().Index }
func (t *Target) HTTPURL() string {
	return "http://" + net.JoinHostPort(runner.Host, strconv.Itoa(t.currentSpec().HTTPPort))
}
func (t *Target) P2PHost() string { return t.currentSpec().P2PHost }
func (t *Target) P2PPort() int    { return t.currentSpec().P2PPort }

// Ports are the engine's HTTP port and every rank's P2P port
// (fault.NetTarget): every port its hosts listen on.
func (t *Target) Ports() []int {
	s := t.currentSpec()
	return append([]int{s.HTTPPort}, s.P2PPorts()...)
}

// P2PAddr is the engine's P2P listener on the fabric.
func (t *Target) P2PAddr() string {
	s := t.currentSpec()
	return net.JoinHostPort(s.P2PHost, strconv.Itoa(s.P2PPort))
}

func (t *Target) LogTail(n int) []string { return t.tail.last(n) }

// State is the engine's state as the cluster knows it. An engine of the
// virtual cluster is goroutines of p2pfault's own process: Pid, Sid and
// Members are zero (it has no process of its own), and Restarts counts
// its restarts as a launched engine's do.
func (t *Target) State() event.EngineInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := event.EngineInfo{
		Name: t.spec.Name, Role: t.spec.Role, Index: t.spec.Index, State: t.state,
		HTTPPort: t.spec.HTTPPort, P2PPort: t.spec.P2PPort, Restarts: t.restarts, Exit: t.exit,
	}
	// Stopped while any process of it is, as the runner reads a
	// session's members (a stall of one rank's core shows so).
	if t.state == event.StateReady && t.eng != nil && slices.ContainsFunc(t.eng.Processes(), func(p sim.Process) bool { return p.Frozen }) {
		in.State = event.StateStopped
	}
	if !t.started.IsZero() && t.eng != nil {
		in.Uptime = time.Since(t.started)
	}
	return in
}

// Report is what the engine's own means show of it (fault.Reporter): its
// hosts frozen (each process's state in Procs), an instance running, its
// listeners; Ready asks /health.
func (t *Target) Report() fault.Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := fault.Report{Instance: t.instance, Cut: t.cuts[t.spec.Name]}
	if t.eng != nil {
		r.Frozen = t.eng.Frozen()
		for _, p := range t.eng.Processes() {
			r.Procs = append(r.Procs, fault.Proc{Name: p.Name, Frozen: p.Frozen})
		}
		select {
		case <-t.eng.Done():
		default:
			r.Running = true
		}
	}
	httpAddr := net.JoinHostPort(runner.Host, strconv.Itoa(t.spec.HTTPPort))
	r.Addrs = []string{httpAddr, net.JoinHostPort(t.spec.P2PHost, strconv.Itoa(t.spec.P2PPort))}
	r.Ready = func(ctx context.Context) error { return t.c.healthy(ctx, httpAddr) }
	return r
}

// start runs spec's engine on hosts (the engine's own with sameHost, as
// a restart on the same ports; else new ones, as new processes) and
// waits until it answers /health. A restart (kill, restore, replace) loads
// its model for the cluster's RestartDelay, as the runner's does.
func (t *Target) start(ctx context.Context, spec runner.Spec, sameHost, restart bool) error {
	t.mu.Lock()
	if t.hosts == nil || !sameHost {
		t.hosts = sim.NewHosts(t.c.fabric, spec.Name)
	}
	h := t.hosts
	t.spec, t.state, t.exit = spec, event.StateStarting, ""
	if restart {
		t.state = event.StateRestarting
	}
	t.mu.Unlock()
	t.c.onChange(t)

	args := append([]string(nil), spec.Args[2:]...) // after "sim serve": MODEL, then the flags
	if restart && t.c.cfg.RestartDelay > 0 {
		args = append(args, "--sim-startup-delay", t.c.cfg.RestartDelay.String())
	}
	env := map[string]string{}
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	lw := &lineWriter{emit: func(line string) {
		t.tail.add(line)
		t.c.onLog(spec.Name, line)
	}}
	eng, err := sim.StartInProcess(context.Background(), args, env, h, lw)
	if err != nil {
		return fmt.Errorf("start %s: %w", spec.Name, err)
	}
	recorded := make(chan struct{})
	t.mu.Lock()
	t.eng, t.recorded = eng, recorded
	t.instance++
	t.mu.Unlock()
	go t.watch(eng, lw, recorded)

	rctx, cancel := context.WithTimeout(ctx, t.c.cfg.ReadyTimeout)
	defer cancel()
	select {
	case <-eng.Ready():
	case <-eng.Done():
		return fmt.Errorf("%s exited before it was ready: %v", spec.Name, eng.Err())
	case <-rctx.Done():
		return fmt.Errorf("%s not ready within %v: %w", spec.Name, t.c.cfg.ReadyTimeout, rctx.Err())
	}
	addr := net.JoinHostPort(runner.Host, strconv.Itoa(spec.HTTPPort))
	tick := time.NewTicker(healthEvery)
	defer tick.Stop()
	for {
		err := t.c.healthy(rctx, addr)
		if err == nil {
			break
		}
		select {
		case <-eng.Done():
			return fmt.Errorf("%s exited before it was ready: %v", spec.Name, eng.Err())
		case <-rctx.Done():
			return fmt.Errorf("%s not ready within %v: %v", spec.Name, t.c.cfg.ReadyTimeout, err)
		case <-tick.C:
		}
	}
	t.mu.Lock()
	if t.eng == eng {
		t.state, t.started = event.StateReady, time.Now()
	}
	t.mu.Unlock()
	t.c.onChange(t)
	return nil
}

// watch records how an instance exited, once it has.
func (t *Target) watch(eng *sim.InProcess, lw *lineWriter, recorded chan struct{}) {
	<-eng.Done()
	lw.flush()
	t.mu.Lock()
	if t.eng != eng {
		t.mu.Unlock()
		close(recorded)
		return
	}
	exit := "code 0"
	if err := eng.Err(); errors.Is(err, sim.ErrKilled) {
		exit = "signal killed"
	} else if err != nil {
		exit = err.Error()
	}
	t.exit = exit
	if t.state != event.StateRemoved && t.state != event.StateRestarting {
		t.state = event.StateExited
	}
	t.mu.Unlock()
	close(recorded)
	t.c.onChange(t)
}

// running is the instance in force, or an error when none runs.
func (t *Target) running() (*sim.InProcess, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.eng == nil {
		return nil, fmt.Errorf("not running")
	}
	select {
	case <-t.eng.Done():
		return nil, fmt.Errorf("not running (%s)", t.exit)
	default:
	}
	return t.eng, nil
}

// Stop freezes the engine's hosts (SIGSTOP of its session): every
// goroutine of the engine stops at its next step. It returns when the freeze was made.
func (t *Target) Stop(context.Context) (time.Time, error) {
	eng, err := t.running()
	if err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	eng.Freeze()
	t.c.onChange(t)
	return at, nil
}

// Continue thaws the engine (SIGCONT): timers due meanwhile fire late.
func (t *Target) Continue(context.Context) error {
	eng, err := t.running()
	if err != nil {
		return err
	}
	eng.Thaw()
	t.c.onChange(t)
	return nil
}

// Kill crashes the engine (SIGKILL) and starts it again on the same hosts
// and ports once the old instance has ended; it returns when the new one
// is ready.
func (t *Target) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.crashAndStart(ctx, signalled, func() (runner.Spec, bool, error) { return t.currentSpec(), true, nil })
}

// crash is how crashAndStart ends the running instance: SIGKILL of the
// whole engine, or of one rank's core (the engine then ends itself).
type crash func(eng *sim.InProcess) error

func crashAll(eng *sim.InProcess) error { eng.Kill(); return nil }

// crashAndStart crashes the running instance (SIGKILL), waits until it has
// ended and starts the spec next gives (on the same hosts when it says so,
// else new ones), returning when that is ready.
func (t *Target) crashAndStart(ctx context.Context, signalled func(time.Time, error), next func() (spec runner.Spec, sameHost bool, err error)) (time.Time, error) {
	return t.crashWith(ctx, crashAll, signalled, next)
}

// crashWith is crashAndStart ending the instance with how.
func (t *Target) crashWith(ctx context.Context, how crash, signalled func(time.Time, error), next func() (spec runner.Spec, sameHost bool, err error)) (time.Time, error) {
	eng, err := t.running()
	if err != nil {
		return time.Time{}, err
	}
	spec, sameHost, err := next()
	if err != nil {
		return time.Time{}, err
	}
	t.mu.Lock()
	t.state = event.StateRestarting
	t.mu.Unlock()
	at := time.Now()
	err = how(eng)
	if signalled != nil {
		signalled(at, err)
	}
	if err != nil {
		return time.Time{}, err
	}
	t.c.onChange(t)
	<-eng.Done()
	t.mu.Lock()
	t.restarts++
	t.mu.Unlock()
	if err := t.start(ctx, spec, sameHost, true); err != nil {
		return time.Time{}, err
	}
	return t.readyAt(), nil
}

func (t *Target) readyAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

// Terminate sends SIGTERM (a frozen engine acts on it once thawed, which
// Terminate does, as the runner sends SIGCONT with it) and returns once
// the engine has ended; it stays down until Restore.
func (t *Target) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	eng, err := t.running()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.state = event.StateRemoved
	t.mu.Unlock()
	if signalled != nil {
		signalled(time.Now(), nil)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Terminate(ctx) }()
	eng.Thaw()
	err = <-done
	if ctx.Err() != nil {
		return fmt.Errorf("still up when the wait ended: %w", ctx.Err())
	}
	_ = err // a terminated engine's exit status is its own (recorded by watch)
	t.c.onChange(t)
	return nil
}

// Restore starts a terminated engine again on its ports.
func (t *Target) Restore(ctx context.Context) (time.Time, error) {
	if _, err := t.running(); err == nil {
		return time.Time{}, fmt.Errorf("already running")
	}
	t.mu.Lock()
	t.restarts++
	t.mu.Unlock()
	if err := t.start(ctx, t.currentSpec(), true, true); err != nil {
		return time.Time{}, err
	}
	return t.readyAt(), nil
}

// CanReplace is nil: the cluster starts its engines from their command
// lines, on any ports.
func (t *Target) CanReplace() error { return nil }

// Replace crashes the engine (SIGKILL) and starts a new one in its place
// on new ports, on new hosts (new processes); it returns when the new one
// is ready, and from then on the target's addresses are the new engine's.
func (t *Target) Replace(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.crashAndStart(ctx, signalled, func() (runner.Spec, bool, error) {
		httpPort, p2pPort := t.c.newPorts()
		spec, err := runner.SpecAt(t.c.cfg, t.pos, httpPort, p2pPort)
		return spec, false, err
	})
}

// stop ends the engine at the cluster's end: SIGTERM (thawed), SIGKILL
// after the grace.
func (t *Target) stop(ctx context.Context) {
	eng, err := t.running()
	if err != nil {
		return
	}
	t.mu.Lock()
	recorded := t.recorded
	t.mu.Unlock()
	gctx, cancel := context.WithTimeout(ctx, t.c.cfg.StopGrace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Terminate(gctx) }()
	eng.Thaw()
	if <-done != nil && gctx.Err() != nil {
		eng.Kill()
		<-eng.Done()
	}
	<-recorded
}
