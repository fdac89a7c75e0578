package vcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/sim"
)

// Ranks is the engine's --data-parallel-size (1 without): the probe pins
// trials to each rank.
func (t *Target) Ranks() int { return t.currentSpec().RankCount() }

// RankTarget is rank r of the engine as the fault kinds act on it: a
// rank's kill (its core's SIGKILL: sim.InProcess.KillRank, after which the
// engine ends itself as vLLM's front end does, and is restarted whole), a
// partition or loss of its own P2P port (netCuts), but not a stall: the
// virtual cluster freezes whole hosts, and a stall of one rank needs the
// engine's processes.
func (t *Target) RankTarget(r int) (fault.Target, error) {
	if n := t.Ranks(); r < 0 || r >= n {
		return nil, fmt.Errorf("%s has no rank %d: its data-parallel size is %d (ranks 0-%d)", t.Name(), r, n, n-1)
	}
	return &rankTarget{t: t, rank: r}, nil
}

// rankTarget is one rank of a virtual engine.
type rankTarget struct {
	t    *Target
	rank int
}

var (
	_ fault.Reporter  = (*rankTarget)(nil)
	_ fault.NetTarget = (*rankTarget)(nil)
)

func (r *rankTarget) Name() string { return event.RankName(r.t.Index(), r.rank) }

// Ports are the rank's own P2P port: a partition of one rank cuts only it,
// as runner.RankTarget's does on a launched engine.
func (r *rankTarget) Ports() []int { return []int{r.p2pPort()} }

func (r *rankTarget) p2pPort() int { return r.t.P2PPort() + r.rank }

// P2PAddr is the rank's P2P listener on the fabric.
func (r *rankTarget) P2PAddr() string {
	return net.JoinHostPort(r.t.P2PHost(), strconv.Itoa(r.p2pPort()))
}

// Stop is refused: the virtual cluster freezes whole engines (their host).
func (r *rankTarget) Stop(context.Context) (time.Time, error) {
	return time.Time{}, fmt.Errorf("the virtual cluster stops whole engines (their host), not one rank's core: a stall of %s needs --engine sim", r.Name())
}

func (r *rankTarget) Continue(ctx context.Context) error { return r.t.Continue(ctx) }

// Kill crashes the rank's core; the engine ends with it (the front end
// stops the other cores) and is restarted whole on the same ports.
func (r *rankTarget) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return r.t.crashWith(ctx, r.crashCore, signalled, func() (runner.Spec, bool, error) { return r.t.currentSpec(), true, nil })
}

func (r *rankTarget) crashCore(eng *sim.InProcess) error { return eng.KillRank(r.rank) }

// Terminate, Restore: one rank's removal is the engine's.
func (r *rankTarget) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	return r.t.Terminate(ctx, signalled)
}

func (r *rankTarget) Restore(ctx context.Context) (time.Time, error) { return r.t.Restore(ctx) }

// Report is the engine's (a rank's kill is verified as the engine's), with
// the cut the cluster holds on the rank's port.
func (r *rankTarget) Report() fault.Report {
	rep, name := r.t.Report(), fault.CutName(r)
	r.t.mu.Lock()
	rep.Cut = r.t.cuts[name]
	r.t.mu.Unlock()
	return rep
}

// CrashCore crashes rank r's core alone (sim.InProcess.KillRank); the
// engine then ends itself, and is not restarted. The core's death is
// visible when it returns: its connections' resets and FINs are queued.
func (t *Target) CrashCore(_ context.Context, r int) (time.Time, error) {
	eng, err := t.running()
	if err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	return at, eng.KillRank(r)
}
