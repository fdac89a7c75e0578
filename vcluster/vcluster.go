// Package vcluster is the virtual cluster: a third experiment.Opener, beside
// the engines p2pfault launches (experiment.Launch) and the ones it attaches
// to (package attach). Every engine, front end and cores, runs as
// goroutines of p2pfault's own process (sim.StartInProcess), each process
// on a host of its own on one in-memory network (package memnet), so a
// whole run fits in a
// testing/synctest bubble on its fake clock: a 30 s stall takes as long as
// the CPU work in it, and no scheduler hiccup moves a latency.
//
// The engines are started from the same command lines the runner builds
// for `p2pfault sim serve` (runner.Plan: arms, modes and --sim-defect flags
// mean the same), and the faults act as the kernel would on a process:
// a stall freezes the engine's hosts (SIGSTOP of its session; of one
// rank, its core's host alone), a kill crashes them (SIGKILL: connections
// reset, connects refused) and starts it again on the same ports, a
// replace starts a new engine on new hosts at new ports, a partition or a
// loss drops the target's ports (an engine's every port, a rank's P2P
// port), as an nftables rule does. The
// experiment sees none of this: it asks the cluster's abilities (its own
// network, its own link cuts) and the targets' (fault.Reporter: what was
// frozen or cut), never which cluster it has.
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
	"p2pfault/memnet"
	"p2pfault/netenv"
	"p2pfault/runner"
	"p2pfault/sim"
)

// Engine is the run's RunInfo.Engine on the virtual cluster.
const Engine = "virtual"

// Defaults where the runner's Config leaves a field zero.
const (
	defaultReadyTimeout = runner.DefaultSimReadyTimeout
	defaultStopGrace    = runner.DefaultStopGrace
	defaultLogTail      = runner.DefaultLogTail
	// healthEvery is how often an engine's /health is asked while it
	// starts, as the runner polls a launched one.
	healthEvery = 20 * time.Millisecond
	// replacePortBase is where a replace's new ports are drawn from:
	// clear of the runner's default bases (7777, 8100, 8200) and of
	// memnet's ephemeral range.
	replacePortBase = 20000
)

// Opener opens a virtual cluster of the engines Config describes (its
// Engine must be the sim; ports, binaries and the port pool mean nothing
// here: each cluster has a network of its own). Seed drives the network's
// loss draws, so a run with loss is the same run every time.
type Opener struct {
	Config runner.Config
	Seed   uint64
}

var _ experiment.Opener = Opener{}

// config is o.Config as the runner plans it for the sim: the binary is
// never looked up (nothing is executed).
func (o Opener) config() (runner.Config, error) {
	cfg := o.Config
	if cfg.Engine != "" && cfg.Engine != runner.EngineSim {
		return cfg, fmt.Errorf("the virtual cluster runs the simulated engine, not %s", cfg.Engine)
	}
	cfg.Engine, cfg.SelfBin = runner.EngineSim, "p2pfault"
	cfg.FreePorts, cfg.PortPool = false, nil
	return cfg, nil
}

// Plan checks the engines' configuration as the runner does.
func (o Opener) Plan(fault.Timeline) (experiment.Plan, error) {
	cfg, err := o.config()
	if err != nil {
		return experiment.Plan{}, err
	}
	specs, err := runner.Plan(cfg)
	if err != nil {
		return experiment.Plan{}, err
	}
	p := experiment.Plan{Model: specs[0].Args[2], Engine: Engine, OwnNetwork: true}
	p.Sources, p.Ranks = experiment.SourcesOf(specs)
	return p, nil
}

// Open starts every engine on a fabric of its own and returns once each
// answers /health. Call it inside the bubble that runs the experiment.
func (o Opener) Open(ctx context.Context, env experiment.OpenEnv) (experiment.Cluster, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	cfg.TimeScale = env.TimeScale
	specs, err := runner.Plan(cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, env: env, fabric: memnet.New(o.Seed), nextPort: replacePortBase}
	if c.cfg.ReadyTimeout == 0 {
		c.cfg.ReadyTimeout = defaultReadyTimeout
	}
	if c.cfg.StopGrace == 0 {
		c.cfg.StopGrace = defaultStopGrace
	}
	if c.cfg.LogTail == 0 {
		c.cfg.LogTail = defaultLogTail
	}
	c.client = c.fabric.Host("p2pfault")
	for i, s := range specs {
		c.engines = append(c.engines, &Target{c: c, pos: i, spec: s, tail: newTail(c.cfg.LogTail), cuts: map[string]string{}})
	}
	errs := make([]error, len(c.engines))
	var wg sync.WaitGroup
	for i, t := range c.engines {
		wg.Go(func() { errs[i] = t.start(ctx, t.spec, false, false) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// Cluster is a running virtual cluster: sources by index, then the
// decoder, each a Target.
type Cluster struct {
	cfg    runner.Config
	env    experiment.OpenEnv
	fabric *memnet.Fabric
	client *memnet.Host // p2pfault's own host: the probe, scraper and checks dial from it

	engines []*Target

	mu       sync.Mutex
	nextPort int
	stopped  bool

	notifyMu sync.Mutex // OnLog and OnChange, one at a time, in order
}

var (
	_ experiment.Cluster = (*Cluster)(nil)
	_ fault.Network      = netCuts{}
)

func (c *Cluster) Sources() []experiment.Target {
	var out []experiment.Target
	for _, t := range c.engines[:len(c.engines)-1] {
		out = append(out, t)
	}
	return out
}

func (c *Cluster) Decoder() experiment.Target { return c.engines[len(c.engines)-1] }

// Network is p2pfault's host on the cluster's fabric: what the probe, the
// scraper and the fault verifications dial through (the experiment's
// networked ability).
func (c *Cluster) Network() netenv.Network { return c.client }

// FaultNetwork cuts the engines' links in the fabric (the experiment's
// netFaulter ability): nothing on the host changes, so nothing is recorded.
func (c *Cluster) FaultNetwork() (fault.Network, error) { return netCuts{c}, nil }

// Stop ends every engine: thawed, sent SIGTERM, killed after the stop
// grace if still up; it returns once every goroutine of theirs has ended.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range c.engines {
		wg.Go(func() { t.stop(ctx) })
	}
	wg.Wait()
	return nil
}

// netCuts is the fabric as the network kinds see it: the ports of a
// target dropped both ways, or a share of their segments lost, as package
// netfault's rules do on a real machine (an engine's every port, or one
// rank's P2P port alone), whichever of the engine's hosts listens on
// them. A connection the engine dialled from an ephemeral port is not
// caught, as on a real host.
type netCuts struct{ c *Cluster }

// engine is the engine a cut names: "source-0", or one rank of it
// ("source-0.rank1", fault.CutName).
func (n netCuts) engine(target string) (*Target, error) {
	name, _, _ := strings.Cut(target, ".")
	for _, t := range n.c.engines {
		if t.Name() == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no engine %s in the virtual cluster", name)
}

// Partition drops the target's ports.
func (n netCuts) Partition(target string, ports ...int) error {
	return n.put(target, "partition", ports, func() { n.c.fabric.PartitionPorts(target, ports...) })
}

func (n netCuts) Loss(target string, pct int, ports ...int) error {
	return n.put(target, fmt.Sprintf("loss %d%%", pct), ports, func() {
		n.c.fabric.LossPorts(target, float64(pct)/100, ports...)
	})
}

// put puts a cut on target's ports (replacing the one it holds, as
// netfault does) and records it for the target's report.
func (n netCuts) put(target, cut string, ports []int, do func()) error {
	if len(ports) == 0 {
		return fmt.Errorf("%s %s: no ports given", cut, target)
	}
	t, err := n.engine(target)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hosts == nil {
		return fmt.Errorf("%s %s: %s has not started", cut, target, t.spec.Name)
	}
	do()
	t.cuts[target] = cut
	return nil
}

func (n netCuts) Heal(target string) error {
	t, err := n.engine(target)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n.c.fabric.HealPorts(target)
	delete(t.cuts, target)
	return nil
}

// newPorts are two ports no engine of the cluster listens on or was
// planned on, for a replace.
func (c *Cluster) newPorts() (int, int) {
	used := map[int]bool{}
	for _, t := range c.engines {
		s := t.currentSpec()
		used[s.HTTPPort], used[s.P2PPort] = true, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pick := func() int {
		for used[c.nextPort] {
			c.nextPort++
		}
		p := c.nextPort
		c.nextPort++
		return p
	}
	return pick(), pick()
}

func (c *Cluster) onLog(engine, line string) {
	if c.env.OnLog == nil {
		return
	}
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.env.OnLog(engine, line)
}

func (c *Cluster) onChange(t *Target) {
	if c.env.OnChange == nil {
		return
	}
	in := t.State()
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.env.OnChange(in)
}

// healthy asks addr's /health once, from p2pfault's host.
func (c *Cluster) healthy(ctx context.Context, httpAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := c.client.DialContext(ctx, "tcp", httpAddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", httpAddr); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if n == 0 {
		return fmt.Errorf("GET /health: no answer: %v", err)
	}
	status := strings.Fields(string(buf[:n]))
	if len(status) < 2 || status[1] != "200" {
		return fmt.Errorf("GET /health answered %q", strings.SplitN(string(buf[:n]), "\r\n", 2)[0])
	}
	return nil
}

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
