package experiment

import (
	"context"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/netenv"
)

// Opener opens the cluster of a run. It is the one way a run gets its
// engines, so the experiment never asks which it has: package launch
// starts them (launch.Opener), package vcluster runs them in this process
// on a fake clock (vcluster.Opener), package attach takes engines
// p2pfault did not start (attach.Cluster). A new kind of cluster is one
// more package implementing it (docs/architecture.md, "An opener").
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
	// (nil: one each, and nil whenever every source has one): what a
	// timeline's source-N/rankR may name.
	Ranks  []int
	Model  string // what every engine serves: the probe's "model"
	Engine string // the run's RunInfo.Engine: sim, vllm, virtual, attached
	// OwnNetwork: the cluster it opens is a NetFaulter, so the network
	// kinds need nothing of the host's firewall (their Setup, a check of
	// nftables and CAP_NET_ADMIN, is not asked).
	OwnNetwork bool
	// ShapesLinks: its targets shape their packets themselves
	// (fault.Shaper), so the kinds that only slow a link (latency,
	// bandwidth) need no link of the run's.
	ShapesLinks bool
	// NoLinks is why p2pfault cannot make links in this cluster ("": it
	// can): a run that needs them (--link, a link kind) is refused with it.
	NoLinks string
	// Decoders is the number of decoders when there are several (0 or 1:
	// one).
	Decoders int
	// UnboundStoreTimeout is the engines' unbound_store_timeout_s at real
	// time (0: vLLM's default, 60 s): how long a source keeps a store no
	// fetch binds (check.NameParkedStores).
	UnboundStoreTimeout time.Duration
}

// PlanRanks is a Plan's Ranks from each source's count of data-parallel
// ranks: nil when every source has one (the plain cluster, whose timeline
// names no ranks and whose tables have no rank columns), else the counts.
// Each opener plans through it, so the rule has one home.
func PlanRanks(counts []int) []int {
	for _, n := range counts {
		if n > 1 {
			return counts
		}
	}
	return nil
}

// OpenEnv is what the run gives the cluster it opens; a cluster uses what
// it has a use for.
type OpenEnv struct {
	// OutDir is the run's folder, where a cluster keeps what it writes
	// (a launched one its engine logs and sessions.json).
	OutDir string
	// TimeScale is the run's: a simulated engine's timeouts are scaled
	// by it.
	TimeScale float64
	// OnLog is told every line an engine prints and OnChange every engine
	// state change, from one goroutine, in order (a cluster that sees
	// neither calls neither).
	OnLog    func(engine, line string)
	OnChange func(event.EngineInfo)
}

// Cluster is what a run needs of the engines it probes and faults: its
// targets and a way to let them go. Every target's State must stay
// current by itself: the run sends every engine's state once a second.
//
// Some abilities are optional, because a cluster truly may lack them (the
// experiment asks for each by interface, never which cluster it has; an
// opener asserts the ones it means to have, var _ experiment.X = ...):
//   - a FirewallRecorder (network.go) records the run's firewall table on
//     the host before it is made, so `p2pfault cleanup` finds it after a
//     crash; a cluster without one or a NetFaulter (an attached cluster,
//     whose engines may be on other hosts) gets no network faults;
//   - a Networked cluster's engines are reached on a network of its own
//     (a virtual cluster's in-memory one): the probe, the scraper and the
//     fault verifications dial through it; without one, the OS's;
//   - a NetFaulter cuts and heals its engines' links by its own means (a
//     virtual cluster in its in-memory network): the network kinds use
//     it, and no firewall is made, checked or recorded on the host.
//
// Its targets may be fault.Inspectable (their processes are read in
// /proc) or fault.Reporter (they say what was done to them); the fault
// kinds verify their effect through either. A source of several
// data-parallel ranks is Ranked.
type Cluster interface {
	Sources() []Target // by index
	Decoder() Target
	// Stop ends the run's hold on the engines: engines the cluster
	// started are stopped; attached ones are left as found.
	Stop(ctx context.Context) error
}

// Networked is a Cluster whose engines are reached on a network of its
// own rather than the OS's.
type Networked interface {
	Network() netenv.Network
}

// NetFaulter is a Cluster that partitions, loses and heals its engines'
// links itself (fault.Network), with no host state to record: the cut
// ends with the cluster.
type NetFaulter interface {
	FaultNetwork() (fault.Network, error)
}

// networkOf is the network the run dials c's engines on: c's own, or nil
// (the OS's).
func networkOf(c Cluster) netenv.Network {
	if n, ok := c.(Networked); ok {
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

// Decoders is a Cluster of several decoders (--decoders): the probe
// spreads its trials over them. A cluster without it has one, Decoder.
type Decoders interface {
	// Decoders are every decoder by index, Decoder first.
	Decoders() []Target
}

// several is n when it is more than one, else 0: a count the stream
// carries only when it is news (RunInfo.Decoders).
func several(n int) int {
	if n > 1 {
		return n
	}
	return 0
}

// decodersOf are c's decoders by index.
func decodersOf(c Cluster) []Target {
	if d, ok := c.(Decoders); ok {
		return d.Decoders()
	}
	return []Target{c.Decoder()}
}

// targets are every engine of c: sources by index, then the decoders.
func targets(c Cluster) []Target {
	return append(c.Sources(), decodersOf(c)...)
}
