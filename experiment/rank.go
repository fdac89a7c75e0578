package experiment

import (
	"fmt"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/probe"
	"p2pfault/runner"
)

// ranked is a source Target of several data-parallel ranks (an engine
// started with --data-parallel-size N: one front end, N engine cores,
// rank r's P2P port at P2PPort()+r). The probe pins trials to each rank,
// and a fault of one rank's grain acts on RankTarget(r). A Target that is
// not ranked has one rank.
type ranked interface {
	Ranks() int
	RankTarget(r int) (fault.Target, error)
}

// ranksOf is t's number of data-parallel ranks.
func ranksOf(t Target) int {
	if r, ok := t.(ranked); ok {
		return max(r.Ranks(), 1)
	}
	return 1
}

// sourceRanks is RunInfo.SourceRanks of the sources: each one's ranks, or
// nil when every source has one.
func sourceRanks(ranks []int) []int {
	for _, n := range ranks {
		if n > 1 {
			return ranks
		}
	}
	return nil
}

// SourcesOf is how many sources specs start and each one's data-parallel
// ranks (Plan.Ranks: nil when every source has one).
func SourcesOf(specs []runner.Spec) (sources int, ranks []int) {
	for _, s := range specs {
		if s.Role == event.RoleSource {
			sources++
			ranks = append(ranks, s.RankCount())
		}
	}
	return sources, sourceRanks(ranks)
}

// probeSource is how the probe names source t: its addresses and ranks.
func probeSource(t Target) probe.Source {
	return probe.Source{Index: t.Index(), URL: t.HTTPURL(), P2PHost: t.P2PHost(), P2PPort: t.P2PPort(), Ranks: ranksOf(t)}
}

// actTarget is what action a acts on, of source t: the source itself, or
// one rank of it (a.OnRank; its kind takes one: admit asked), refused
// with a reason when t has no such rank.
func actTarget(t Target, a fault.Action) (fault.Target, error) {
	if !a.OnRank {
		return t, nil
	}
	r, ok := t.(ranked)
	if !ok || r.Ranks() <= 1 {
		return nil, fmt.Errorf("%s has one engine core (no data-parallel ranks: see --source-dp), so it has no %s", t.Name(), a.TargetName())
	}
	return r.RankTarget(a.Rank)
}

// Ranks is the launched engine's --data-parallel-size (1 without).
func (t launchedTarget) Ranks() int { return t.Spec().RankCount() }

// RankTarget is rank r of the launched engine as the fault kinds act on
// it: its core's processes (Host's Part), its own P2P port.
func (t launchedTarget) RankTarget(r int) (fault.Target, error) {
	rt, err := t.Target.Rank(r)
	if err != nil {
		return nil, err
	}
	return launchedRank{rt}, nil
}

// launchedRank is one rank of a launched engine.
type launchedRank struct{ runner.RankTarget }

var (
	_ fault.Inspectable = launchedRank{}
	_ fault.NetTarget   = launchedRank{}
	_ fault.Replacer    = launchedRank{}
)

// Host is the engine as /proc shows it, the rank's core as its Part: a
// stall is verified on exactly those pids, a kill on the whole session
// (vLLM ends the engine when a core dies).
func (t launchedRank) Host() (fault.Host, bool) {
	h, ok := launchedTarget{t.Target}.Host()
	if !ok {
		return h, false
	}
	h.Part = t.Pids()
	if len(h.Part) == 0 {
		return h, false
	}
	return h, true
}
