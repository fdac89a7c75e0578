package experiment

import (
	"fmt"

	"p2pfault/fault"
	"p2pfault/probe"
)

// Ranked is a source Target of several data-parallel ranks (an engine
// started with --data-parallel-size N: one front end, N engine cores,
// rank r's P2P port at P2PPort()+r). The probe pins trials to each rank,
// and a fault of one rank's grain acts on RankTarget(r), which refuses a
// rank it does not have. A Target that is not Ranked has one rank.
type Ranked interface {
	Ranks() int
	RankTarget(r int) (fault.Target, error)
}

// ranksOf is t's number of data-parallel ranks.
func ranksOf(t Target) int {
	if r, ok := t.(Ranked); ok {
		return max(r.Ranks(), 1)
	}
	return 1
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
	r, ok := t.(Ranked)
	if !ok || r.Ranks() <= 1 {
		return nil, fmt.Errorf("%s has one engine core (no data-parallel ranks: see --source-dp), so it has no %s", t.Name(), a.TargetName())
	}
	return r.RankTarget(a.Rank)
}
