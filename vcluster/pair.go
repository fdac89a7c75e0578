package vcluster

import (
	"fmt"

	"p2pfault/fault"
	"p2pfault/memnet"
)

var _ fault.PairNetwork = netCuts{}

// pairCut is a cut on the link between two engines alone: every host of
// one and every host of the other (front ends and cores), both ways, as
// memnet's host pairs cut them; every other pair of hosts is untouched.
type pairCut struct {
	what string // "partition", "loss 30%"
	a, b []*memnet.Host
	loss bool
}

// PartitionPair drops every packet between engines a and b.
func (n netCuts) PartitionPair(name, a, b string) error {
	return n.putPair(name, a, b, pairCut{what: "partition"}, 1)
}

// LossPair loses pct % of the segments between engines a and b.
func (n netCuts) LossPair(name string, pct int, a, b string) error {
	return n.putPair(name, a, b, pairCut{what: fmt.Sprintf("loss %d%%", pct), loss: true}, float64(pct)/100)
}

// PairCut is what cut name holds ("" none).
func (n netCuts) PairCut(name string) string {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return n.c.pairs[name].what
}

func (n netCuts) putPair(name, a, b string, pc pairCut, fraction float64) error {
	ta, err := n.engine(a)
	if err != nil {
		return err
	}
	tb, err := n.engine(b)
	if err != nil {
		return err
	}
	pc.a, pc.b = ta.allHosts(), tb.allHosts()
	if pc.a == nil || pc.b == nil {
		return fmt.Errorf("%s %s–%s: an engine has not started", pc.what, a, b)
	}
	n.healPair(name) // a cut replaces the one of that name, as netfault does
	for _, x := range pc.a {
		for _, y := range pc.b {
			if pc.loss {
				n.c.fabric.Loss(x, y, fraction)
			} else {
				n.c.fabric.Partition(x, y)
			}
		}
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if n.c.pairs == nil {
		n.c.pairs = map[string]pairCut{}
	}
	n.c.pairs[name] = pc
	return nil
}

// healPair ends cut name if it is a pair's, and says whether it was.
func (n netCuts) healPair(name string) bool {
	n.c.mu.Lock()
	pc, ok := n.c.pairs[name]
	delete(n.c.pairs, name)
	n.c.mu.Unlock()
	if !ok {
		return false
	}
	for _, x := range pc.a {
		for _, y := range pc.b {
			if pc.loss {
				n.c.fabric.Loss(x, y, 0)
			} else {
				n.c.fabric.Heal(x, y)
			}
		}
	}
	return true
}

// allHosts are the engine's hosts (nil before it started).
func (t *Target) allHosts() []*memnet.Host {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hosts == nil {
		return nil
	}
	return t.hosts.All()
}
