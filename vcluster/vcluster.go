// Package vcluster is the virtual cluster: a third experiment.Opener, beside
// the engines p2pfault launches (package launch) and the ones it attaches
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
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/memnet"
	"p2pfault/netenv"
	"p2pfault/runner"
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
	var counts []int
	p.Sources, counts = runner.SourcesOf(specs)
	p.Ranks = experiment.PlanRanks(counts)
	p.Decoders = runner.DecodersOf(specs)
	p.UnboundStoreTimeout = cfg.UnboundStoreTimeout
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
// decoders, each a Target.
type Cluster struct {
	cfg    runner.Config
	env    experiment.OpenEnv
	fabric *memnet.Fabric
	client *memnet.Host // p2pfault's own host: the probe, scraper and checks dial from it

	engines []*Target

	mu       sync.Mutex
	nextPort int
	stopped  bool
	pairs    map[string]pairCut // the cuts on one pair of engines in force, by name (pair.go)

	notifyMu sync.Mutex // OnLog and OnChange, one at a time, in order
}

var (
	_ experiment.Cluster    = (*Cluster)(nil)
	_ experiment.Networked  = (*Cluster)(nil)
	_ experiment.Decoders   = (*Cluster)(nil)
	_ experiment.NetFaulter = (*Cluster)(nil)
	_ fault.Network         = netCuts{}
)

func (c *Cluster) Sources() []experiment.Target { return c.ofRole(event.RoleSource) }

func (c *Cluster) Decoder() experiment.Target { return c.ofRole(event.RoleDecoder)[0] }

func (c *Cluster) Decoders() []experiment.Target { return c.ofRole(event.RoleDecoder) }

// ofRole are the engines of role r, in order (sources, then decoders, by
// index).
func (c *Cluster) ofRole(r event.Role) []experiment.Target {
	var out []experiment.Target
	for _, t := range c.engines {
		if t.Role() == r {
			out = append(out, t)
		}
	}
	return out
}

// Network is p2pfault's host on the cluster's fabric: what the probe, the
// scraper and the fault verifications dial through (the experiment's
// Networked ability).
func (c *Cluster) Network() netenv.Network { return c.client }

// FaultNetwork cuts the engines' links in the fabric (the experiment's
// NetFaulter ability): nothing on the host changes, so nothing is recorded.
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
	if n.healPair(target) {
		return nil
	}
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
