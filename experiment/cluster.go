package experiment

import (
	"context"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/runner"
)

// Cluster is what a run needs of the engines it probes and faults: its
// targets and a way to stop it. The engines p2pfault launches are one
// implementation; a cluster described by a file is another.
type Cluster interface {
	Sources() []Target // by index
	Decoder() Target
	Stop(ctx context.Context) error
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

var _ Target = launchedTarget{}

// State is the engine's state as the runner reads it: the event's own type.
func (t launchedTarget) State() event.EngineInfo { return t.Info() }
