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

// RankTarget is rank r of the engine as the fault kinds act on it: its
// engine core, a process of its own (a host of its own on the fabric). A
// stall freezes that core's host alone (SIGSTOP of its process), the front
// end and the other cores running on; a partition or loss drops its own
// P2P port (netCuts); a kill crashes it (its core's SIGKILL:
// sim.InProcess.KillRank), after which the engine ends itself as vLLM's
// front end does, and is restarted whole.
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

// Stop freezes the rank's core alone (SIGSTOP of its process): its P2P
// listener's kernel side goes on (connects wait in its backlog, bytes
// buffer), its own work stops, and the front end's requests routed to it
// wait in its link.
func (r *rankTarget) Stop(context.Context) (time.Time, error) {
	eng, err := r.t.running()
	if err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	if err := eng.FreezeRank(r.rank); err != nil {
		return time.Time{}, err
	}
	// No engine change is told here: the stall kind tells it once the
	// rank's stall is in force (fault.Env.Changed), so the source's
	// condition names the rank from its first event, as a launched
	// engine's does (whose state is read, not pushed).
	return at, nil
}

// Continue thaws the rank's core (SIGCONT of its process).
func (r *rankTarget) Continue(context.Context) error {
	eng, err := r.t.running()
	if err != nil {
		return err
	}
	return eng.ThawRank(r.rank) // the resume tells the change, as Stop's stall does
}

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

// Report is the engine's with the rank's core as its Part (a stall is
// verified as that core frozen and every other process running, a kill as
// the engine's), and the cut the cluster holds on the rank's port.
func (r *rankTarget) Report() fault.Report {
	rep, name := r.t.Report(), fault.CutName(r)
	if 1+r.rank < len(rep.Procs) { // the engine's processes: front end, then cores by rank
		core := rep.Procs[1+r.rank]
		rep.Part, rep.Frozen = core.Name, core.Frozen
	}
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
