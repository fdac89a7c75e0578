package fault

import (
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
	if err == nil {
		if pct >= 100 {
			err = nw.Partition(CutName(nt), nt.Ports()...)
		} else {
			err = nw.Loss(CutName(nt), pct, nt.Ports()...)
		}
	}
	if err != nil {
		err = fmt.Errorf("%s %s: %w", action, f.Target.Name(), err)
		env.Record(action, f.For, f.By, err)
		return err
	}
	cut := &NetCut{net: nw, target: CutName(nt), at: time.Now(), done: make(chan struct{})}
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
