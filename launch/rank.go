package launch

import (
	"p2pfault/fault"
	"p2pfault/runner"
)

// Ranks is the launched engine's --data-parallel-size (1 without).
func (t target) Ranks() int { return t.Spec().RankCount() }

// RankTarget is rank r of the launched engine as the fault kinds act on
// it: its core's processes (Host's Part), its own P2P port.
func (t target) RankTarget(r int) (fault.Target, error) {
	rt, err := t.Target.Rank(r)
	if err != nil {
		return nil, err
	}
	return rankTarget{rt}, nil
}

// rankTarget is one rank of a launched engine.
type rankTarget struct{ runner.RankTarget }

var (
	_ fault.Inspectable = rankTarget{}
	_ fault.NetTarget   = rankTarget{}
	_ fault.Replacer    = rankTarget{}
)

// Host is the engine as /proc shows it, the rank's core as its Part: a
// stall is verified on exactly those pids, a kill on the whole session
// (vLLM ends the engine when a core dies).
func (t rankTarget) Host() (fault.Host, bool) {
	h, ok := target{t.Target}.Host()
	if !ok {
		return h, false
	}
	h.Part = t.Pids()
	if len(h.Part) == 0 {
		return h, false
	}
	return h, true
}
