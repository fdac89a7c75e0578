package experiment

import (
	"context"
	"net"
	"strconv"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/netenv"
	"p2pfault/runner"
)

// Opener opens the cluster of a run: the engines p2pfault launches
// (Launch) or engines it attaches to (package attach). It is the one way
// a run gets its engines, so the experiment never asks which it has.
type Opener interface {
	// Plan is the cluster as the run plans it, before anything starts:
	// it checks its own configuration and the run's timeline (at real
	// time) against what its sources can take, and says how many sources
	// there are, the model they serve and the run's engine label. An error
	// is a usage error (exit 2).
	Plan(tl fault.Timeline) (Plan, error)
	// Open starts the engines or attaches to them, and returns once every
	// one is ready to be probed. ctx is the run's: when it ends, so does
	// the cluster's hold on its engines (Stop is still called).
	Open(ctx context.Context, env OpenEnv) (Cluster, error)
}

// Plan is a cluster as planned.
type Plan struct {
	Sources int
	// Ranks is each source's number of data-parallel ranks, by index
	// (nil: one each): what a timeline's source-N/rankR may name.
	Ranks  []int
	Model  string // what every engine serves: the probe's "model"
	Engine string // the run's RunInfo.Engine: sim, vllm, attached
	// OwnNetwork: the cluster it opens is a netFaulter, so the network
	// kinds need nothing of the host's firewall (their Setup, a check of
	// nftables and CAP_NET_ADMIN, is not asked).
	OwnNetwork bool
}

// OpenEnv is what the run gives the cluster it opens.
type OpenEnv struct {
	OutDir    string  // the run's folder: engine logs, sessions.json
	TimeScale float64 // the run's; a launched sim's timeouts are scaled by it
	// OnLog is told every line an engine prints and OnChange every engine
	// state change, from one goroutine, in order (a cluster that sees
	// neither calls neither).
	OnLog    func(engine, line string)
	OnChange func(event.EngineInfo)
}

// Cluster is what a run needs of the engines it probes and faults: its
// targets and a way to let them go. The engines p2pfault launches are one
// implementation (launched, below); an attach file's are another
// (attach.Cluster). Every target's State must stay current by itself: the
// run sends every engine's state once a second.
//
// Some abilities are optional, because a cluster truly may lack them (the
// experiment asks for each by interface, never which cluster it has):
//   - a firewallRecorder (network.go) records the run's firewall table on
//     the host before it is made, so `p2pfault cleanup` finds it after a
//     crash; a cluster without one or a netFaulter (an attached cluster,
//     whose engines may be on other hosts) gets no network faults;
//   - a networked cluster's engines are reached on a network of its own
//     (a virtual cluster's in-memory one): the probe, the scraper and the
//     fault verifications dial through it; without one, the OS's;
//   - a netFaulter cuts and heals its engines' links by its own means (a
//     virtual cluster in its in-memory network): the network kinds use
//     it, and no firewall is made, checked or recorded on the host.
//
// Its targets may be fault.Inspectable (their processes are read in
// /proc) or fault.Reporter (they say what was done to them); the fault
// kinds verify their effect through either.
type Cluster interface {
	Sources() []Target // by index
	Decoder() Target
	// Stop ends the run's hold on the engines: a launched cluster's are
	// stopped; an attached one is left as found.
	Stop(ctx context.Context) error
}

// networked is a Cluster whose engines are reached on a network of its
// own rather than the OS's.
type networked interface {
	Network() netenv.Network
}

// netFaulter is a Cluster that partitions, loses and heals its engines'
// links itself (fault.Network), with no host state to record: the cut
// ends with the cluster.
type netFaulter interface {
	FaultNetwork() (fault.Network, error)
}

// networkOf is the network the run dials c's engines on: c's own, or nil
// (the OS's).
func networkOf(c Cluster) netenv.Network {
	if n, ok := c.(networked); ok {
		return n.Network()
	}
	return nil
}

// Target is one engine of a Cluster: what the probe, the faces and the
// fault kinds need of it.
type Target interface {
	fault.Target
	Role() event.Role
	Index() int
	HTTPURL() string
	P2PHost() string // the literal host a pull names the source by
	P2PPort() int
	State() event.EngineInfo // its process state now
	LogTail(n int) []string
}

// targets are every engine of c: sources by index, then the decoder.
func targets(c Cluster) []Target {
	return append(c.Sources(), c.Decoder())
}

// Launch opens a cluster p2pfault starts through the runner: the engines
// Config describes. Its OutDir, TimeScale and callbacks are the run's.
type Launch struct{ Config runner.Config }

var _ Opener = Launch{}

// Plan checks the engines' configuration (ports, flags, binaries) without
// starting anything.
func (l Launch) Plan(fault.Timeline) (Plan, error) {
	specs, err := runner.Plan(l.Config)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Model: l.Config.Model, Engine: l.Config.Engine}
	p.Sources, p.Ranks = SourcesOf(specs)
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
func (l Launch) Runner(env OpenEnv) runner.Config {
	cfg := l.Config
	cfg.OutDir, cfg.TimeScale = env.OutDir, env.TimeScale
	cfg.OnLog, cfg.OnChange = env.OnLog, env.OnChange
	return cfg
}

// Open starts every engine and waits until each is ready.
func (l Launch) Open(ctx context.Context, env OpenEnv) (Cluster, error) {
	rc, err := runner.Start(ctx, l.Runner(env))
	if err != nil {
		return nil, err
	}
	return newLaunched(rc), nil
}

// launched is a cluster p2pfault started through the runner.
type launched struct {
	c       *runner.Cluster
	sources []Target
	decoder Target
}

var _ Cluster = (*launched)(nil)

func newLaunched(c *runner.Cluster) *launched {
	l := &launched{c: c, decoder: launchedTarget{c.Decoder().Target()}}
	for _, s := range c.Sources() {
		l.sources = append(l.sources, launchedTarget{s.Target()})
	}
	return l
}

func (l *launched) Sources() []Target              { return append([]Target(nil), l.sources...) }
func (l *launched) Decoder() Target                { return l.decoder }
func (l *launched) Stop(ctx context.Context) error { return l.c.Stop(ctx) }

// launchedTarget is a runner engine as a Target.
type launchedTarget struct{ runner.Target }

var (
	_ Target            = launchedTarget{}
	_ fault.Inspectable = launchedTarget{}
	_ fault.NetTarget   = launchedTarget{}
	_ fault.CoreCrasher = launchedTarget{}
	_ fault.Replacer    = launchedTarget{}
)

// State is the engine's state as the runner reads it: the event's own type.
func (t launchedTarget) State() event.EngineInfo { return t.Info() }

// Host is what /proc and the ports show of a launched engine, so the
// fault kinds can verify their effect (package verify): always readable,
// p2pfault started it here.
func (t launchedTarget) Host() (fault.Host, bool) {
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
func (t launchedTarget) Ports() []int {
	s := t.Spec()
	return append([]int{s.HTTPPort}, s.P2PPorts()...)
}

// P2PAddr is the engine's P2P listener, dialled to verify a partition.
func (t launchedTarget) P2PAddr() string {
	return net.JoinHostPort(t.Engine.P2PHost(), strconv.Itoa(t.Engine.P2PPort()))
}

// RecordFirewall and ForgetFirewall record the run's table in the
// runner's sessions.json, beside its engines (firewallRecorder).
func (l *launched) RecordFirewall(table string, faults []string) error {
	return l.c.RecordFirewall(table, faults)
}

func (l *launched) ForgetFirewall(table string) error { return l.c.ForgetFirewall(table) }
