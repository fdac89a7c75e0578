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

func (t launchedTarget) Role() event.Role { return event.Role(t.Engine.Role()) }

func (t launchedTarget) State() event.EngineInfo { return engineInfo(t.Info()) }

// engineInfo is the runner's view of an engine as the event stream's.
func engineInfo(in runner.Info) event.EngineInfo {
	return event.EngineInfo{
		Name: in.Name, Role: event.Role(in.Role), Index: in.Index, State: event.State(in.State),
		Pid: in.Pid, Sid: in.Sid, Members: in.Members, HTTPPort: in.HTTPPort, P2PPort: in.P2PPort,
		Uptime: in.Uptime, Restarts: in.Restarts, Exit: in.Exit,
	}
}
