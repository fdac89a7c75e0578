// Package launch is the launched cluster: the experiment.Opener of the
// engines p2pfault starts itself through package runner (the sim or
// vLLM, as processes on this host), beside the virtual cluster (package
// vcluster) and the engines it attaches to (package attach). The
// experiment sees it only through experiment.Opener, Cluster and Target,
// and the abilities it asks for by interface: its targets are
// fault.Inspectable (their sessions in /proc, their ports), and the
// cluster records the run's firewall table in the runner's sessions.json
// (experiment.FirewallRecorder), so the network kinds act through the
// host's nftables.
package launch

import (
	"context"
	"net"
	"strconv"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
)

// Opener opens a cluster p2pfault starts through the runner: the engines
// Config describes. Its OutDir, TimeScale and callbacks are the run's
// (Runner).
type Opener struct{ Config runner.Config }

var _ experiment.Opener = Opener{}

// Plan checks the engines' configuration (ports, flags, binaries) without
// starting anything.
func (o Opener) Plan(fault.Timeline) (experiment.Plan, error) {
	specs, err := runner.Plan(o.Config)
	if err != nil {
		return experiment.Plan{}, err
	}
	p := experiment.Plan{Model: o.Config.Model, Engine: o.Config.Engine}
	var counts []int
	p.Sources, counts = runner.SourcesOf(specs)
	p.Ranks = experiment.PlanRanks(counts)
	p.Decoders = runner.DecodersOf(specs)
	p.UnboundStoreTimeout = o.Config.UnboundStoreTimeout
	if p.Model == "" {
		p.Model = runner.DefaultModel
	}
	if p.Engine == "" {
		p.Engine = runner.EngineSim
	}
	return p, nil
}

// Runner is the runner configuration Open starts the engines with in a run
// of env: the configured engines with the run's output folder, time scale
// (the simulated engines' --sim-time-scale) and callbacks. A check made
// without a run (p2pfault doctor) plans it with runner.Plan, so it sees the
// command lines the run would start and nothing else.
func (o Opener) Runner(env experiment.OpenEnv) runner.Config {
	cfg := o.Config
	cfg.OutDir, cfg.TimeScale = env.OutDir, env.TimeScale
	cfg.OnLog, cfg.OnChange = env.OnLog, env.OnChange
	return cfg
}

// Open starts every engine and waits until each is ready.
func (o Opener) Open(ctx context.Context, env experiment.OpenEnv) (experiment.Cluster, error) {
	rc, err := runner.Start(ctx, o.Runner(env))
	if err != nil {
		return nil, err
	}
	return newCluster(rc), nil
}

// cluster is a cluster p2pfault started through the runner.
type cluster struct {
	c        *runner.Cluster
	sources  []experiment.Target
	decoders []experiment.Target
}

var (
	_ experiment.Cluster          = (*cluster)(nil)
	_ experiment.Decoders         = (*cluster)(nil)
	_ experiment.FirewallRecorder = (*cluster)(nil)
)

func newCluster(c *runner.Cluster) *cluster {
	l := &cluster{c: c}
	for _, s := range c.Sources() {
		l.sources = append(l.sources, target{s.Target()})
	}
	for _, d := range c.Decoders() {
		l.decoders = append(l.decoders, target{d.Target()})
	}
	return l
}

func (l *cluster) Sources() []experiment.Target {
	return append([]experiment.Target(nil), l.sources...)
}

func (l *cluster) Decoder() experiment.Target { return l.decoders[0] }

func (l *cluster) Decoders() []experiment.Target {
	return append([]experiment.Target(nil), l.decoders...)
}

// Stop stops every engine p2pfault started.
func (l *cluster) Stop(ctx context.Context) error { return l.c.Stop(ctx) }

// RecordFirewall and ForgetFirewall record the run's table in the
// runner's sessions.json, beside its engines, where `p2pfault cleanup`
// finds it after a crash.
func (l *cluster) RecordFirewall(table string, faults []string) error {
	return l.c.RecordFirewall(table, faults)
}

func (l *cluster) ForgetFirewall(table string) error { return l.c.ForgetFirewall(table) }

// target is a runner engine as an experiment.Target.
type target struct{ runner.Target }

var (
	_ experiment.Target = target{}
	_ experiment.Ranked = target{}
	_ fault.Inspectable = target{}
	_ fault.NetTarget   = target{}
	_ fault.CoreCrasher = target{}
	_ fault.Replacer    = target{}
)

// State is the engine's state as the runner reads it: the event's own type.
func (t target) State() event.EngineInfo { return t.Info() }

// Host is what /proc and the ports show of a launched engine, so the
// fault kinds can verify their effect (package verify): always readable,
// p2pfault started it here.
func (t target) Host() (fault.Host, bool) {
	in := t.Info()
	return fault.Host{
		Sid:  in.Sid,
		Pids: append([]int(nil), in.Members...),
		Addrs: []string{
			net.JoinHostPort(runner.Host, strconv.Itoa(in.HTTPPort)),
			net.JoinHostPort(t.P2PHost(), strconv.Itoa(in.P2PPort)),
		},
		Ready: t.Engine.Healthy,
	}, true
}

// Ports are every port the engine listens on, its HTTP port and every
// rank's P2P port (base..base+N-1): the network kinds drop them.
func (t target) Ports() []int {
	s := t.Spec()
	return append([]int{s.HTTPPort}, s.P2PPorts()...)
}

// P2PAddr is the engine's P2P listener, dialled to verify a partition.
func (t target) P2PAddr() string {
	return net.JoinHostPort(t.Engine.P2PHost(), strconv.Itoa(t.Engine.P2PPort()))
}
