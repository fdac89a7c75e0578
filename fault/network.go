package fault

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Network is the run's packet filter as the network kinds (partition,
// loss, heal) use it: rules keyed by the target's name, over the ports it
// listens on. netfault.Firewall is the implementation; the experiment
// records it on the host before creating it.
type Network interface {
	Partition(target string, ports ...int) error
	Loss(target string, pct int, ports ...int) error
	Heal(target string) error
}

// PairNetwork is a Network that can cut the link between two engines
// alone (the virtual cluster's fabric: memnet's host pairs). A host's
// firewall cannot, faithfully: see ErrNoPairs.
type PairNetwork interface {
	Network
	// PartitionPair and LossPair put cut name on the link between
	// engines a and b, both ways; Heal(name) ends it.
	PartitionPair(name, a, b string) error
	LossPair(name string, pct int, a, b string) error
	// PairCut is the cut name holds ("" none), for verification.
	PairCut(name string) string
}

// ErrNoPairs is why a pair cannot be cut on engines that are processes on
// this host (docs/network-faults.md, "What a partition of ports lets
// through"): on loopback every engine has the same address, so a rule
// tells peers apart by port only, and vLLM's P2P layout makes the
// source's DEALER dial the decoder's P2P port from an ephemeral port the
// kernel picks at connect time. A rule on the decoder's P2P port cuts
// every source's DEALER to it, not source-0's alone, and a rule on the
// source's ports misses that connection; what the source's ephemeral port
// will be is not known before it dials (and changes at each reconnect).
var ErrNoPairs = errors.New("a pair (source-N from decoder-M) can be cut only on --engine virtual: " +
	"on this host's firewall every engine is 127.0.0.1, and the source dials the decoder's P2P port from an ephemeral port, " +
	"so no port rule cuts one pair without cutting the decoder's other sources too (docs/network-faults.md)")

// NetEnv is an Env that can fault the network. The network kinds
// type-assert their Env to it; a run without one refuses them.
type NetEnv interface {
	// Network returns the run's packet filter, creating it on first use
	// (an error says what is missing: rights, nftables, a record).
	Network() (Network, error)
}

// NetTarget is a Target whose listening ports are known. The network
// kinds type-assert their Target to it.
type NetTarget interface {
	Target
	Ports() []int    // every TCP port the engine listens on (HTTP, P2P)
	P2PAddr() string // host:port of its P2P listener, dialled to verify
}

// NetCut is a network fault in force on a target: rules that drop its
// packets, until healed (by heal, its For, or the run's end).
type NetCut struct {
	net    Network
	target string
	at     time.Time

	once     sync.Once
	done     chan struct{}
	healedAt time.Time
	healedBy string
	err      error
}

// canNet is the network kinds' Can: their target must be a NetTarget.
func canNet(t Target) error {
	if _, ok := t.(NetTarget); !ok {
		return fmt.Errorf("p2pfault does not know the ports %s listens on", t.Name())
	}
	return nil
}

// CutName is what the network names t's cut by: its name, one rank's
// "source-0/rank1" spelt "source-0.rank1" (a firewall rule's comment and
// set names take no '/').
func CutName(t Target) string { return strings.ReplaceAll(t.Name(), "/", ".") }

// netOf is what a network kind needs of a firing (its target with ports,
// the run's firewall), or an error naming what is missing.
func netOf(f *Fire) (NetTarget, Network, error) {
	if err := canNet(f.Target); err != nil {
		return nil, nil, err
	}
	nt := f.Target.(NetTarget)
	ne, ok := f.Env.(NetEnv)
	if !ok {
		return nil, nil, fmt.Errorf("this run cannot change the host's firewall")
	}
	nw, err := ne.Network()
	if err != nil {
		return nil, nil, err
	}
	return nt, nw, nil
}

// actNet puts a network fault (a partition at 100, a loss below) on the
// target; it heals by itself after For (0: on heal), and at once when the
// run's context ends: a cut never outlives its run (the run's end deletes
// the whole table in any case).
func actNet(f *Fire, action string, pct int) error {
	env := f.Env
	nt, nw, err := netOf(f)
	var name string
	switch {
	case err == nil && f.Peer != "":
		name, err = cutPair(nw, f, pct)
	case err == nil:
		name = CutName(nt)
		if pct >= 100 {
			err = nw.Partition(name, nt.Ports()...)
		} else {
			err = nw.Loss(name, pct, nt.Ports()...)
		}
	}
	if err != nil {
		err = fmt.Errorf("%s %s: %w", action, f.Target.Name(), err)
		env.Record(action, f.For, f.By, err)
		return err
	}
	cut := &NetCut{net: nw, target: name, at: time.Now(), done: make(chan struct{})}
	env.Hold(cut)
	f.Enter()
	env.Record(action, f.For, f.By, nil)
	env.OpenWindow(cut.at, true)
	env.Changed()
	env.Go(func() {
		undoLater(env.Context(), cut.at, f.For, cut.done, cut.HealBy)
		env.Hold(nil)
		f.Lift()
		by := f.By
		if rb := cut.healedBy; rb != "" {
			by = rb
		}
		env.Record(ActionHeal, 0, by, cut.err)
		env.CloseWindow(cut.healedAt)
		env.Changed()
	})
	return nil
}

// cutPair puts a partition (pct 100) or a loss on the link between f's
// target and f.Peer alone, and returns the cut's name.
func cutPair(nw Network, f *Fire, pct int) (string, error) {
	pn, ok := nw.(PairNetwork)
	if !ok {
		return "", ErrNoPairs
	}
	name := pairCutName(f)
	if pct >= 100 {
		return name, pn.PartitionPair(name, f.Target.Name(), f.Peer)
	}
	return name, pn.LossPair(name, pct, f.Target.Name(), f.Peer)
}

// pairCutName is the cut's name of f's pair: "source-0~decoder-1".
func pairCutName(f *Fire) string { return CutName(f.Target) + "~" + f.Peer }

// verifyPair confirms an action on a pair from what the cluster holds on
// the pair's link (cut: a cut is held, else none is): p2pfault's own
// connects are not on that link, so dialling, as a source's partition is
// verified, would prove nothing.
func verifyPair(f *Fire, cut bool) Effect {
	ne, ok := f.Env.(NetEnv)
	if !ok {
		return Effect{Skipped: true}
	}
	nw, err := ne.Network()
	pn, ok := nw.(PairNetwork)
	if err != nil || !ok {
		return Effect{Skipped: true}
	}
	held := pn.PairCut(pairCutName(f))
	if held == "" {
		return Effect{OK: !cut, Detail: fmt.Sprintf("the cluster holds no cut on the link %s–%s", f.Target.Name(), f.Peer)}
	}
	return Effect{OK: cut, Detail: fmt.Sprintf("the cluster holds %q on the link %s–%s alone", held, f.Target.Name(), f.Peer)}
}

// HealBy deletes the target's rules now (if not done already), asked for
// by someone ("key", "script"; "" for the timer or the run's end), and
// returns once they are gone.
func (c *NetCut) HealBy(by string) error {
	c.once.Do(func() {
		at := time.Now()
		err := c.net.Heal(c.target)
		if err != nil {
			err = fmt.Errorf("heal %s: %w", c.target, err)
		}
		c.healedAt, c.healedBy, c.err = at, by, err
		close(c.done)
	})
	<-c.done
	return c.err
}

// Done is closed once the cut is healed.
func (c *NetCut) Done() <-chan struct{} { return c.done }

// verifyWait is how long a connect to a partitioned port must hang: on
// loopback a SYN-ACK comes back in microseconds and the first SYN is
// retransmitted only after 1 s, so a connect still pending after 1 s had
// its SYN (or SYN-ACK) dropped.
const verifyWait = time.Second
