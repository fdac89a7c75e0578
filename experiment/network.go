package experiment

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/netfault"
	"p2pfault/owner"
)

// FirewallRecorder is a Cluster that records the run's firewall table on
// the host (a launched cluster in its sessions.json) before it is created,
// so a crashed run's table is found and deleted by `p2pfault cleanup`. A
// cluster that cannot record one gets no network faults.
type FirewallRecorder interface {
	RecordFirewall(table string, faults []string) error
	ForgetFirewall(table string) error
}

// network is the run's firewall table, made on the first network fault
// (a run that fires none touches no firewall) and deleted at the run's end.
type network struct {
	runID string

	mu     sync.Mutex
	rec    FirewallRecorder
	fw     *netfault.Firewall
	faults map[string]string // target -> "partition source-0", in force
	closed bool
}

// newRunID names a run's table: arm, case, the owner (this p2pfault's pid
// and start time) and a random part, so runs of one p2pfault (a slice's
// rows) and of several never share one, and a table whose p2pfault is gone
// is known as an orphan by its name alone (netfault.OwnedRunID).
func newRunID(arm, caseName string) string {
	self, err := owner.Self()
	if err != nil {
		self = owner.ID{Pid: os.Getpid()} // named by pid alone (OwnedRunID)
	}
	return netfault.OwnedRunID(arm+"-"+caseName, self)
}

// Table is the name of the run's firewall table (made or not).
func (n *network) Table() string { return netfault.TableName(n.runID) }

// get returns the table, recording and creating it on first use.
func (n *network) get(cl Cluster) (*netfault.Firewall, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("the run is ending")
	}
	if n.fw != nil {
		return n.fw, nil
	}
	rec, ok := cl.(FirewallRecorder)
	if !ok {
		return nil, errors.New("this cluster cannot record a firewall table on the host, so p2pfault makes none")
	}
	if err := netfault.Check("network faults"); err != nil {
		return nil, err
	}
	// Recorded before it exists: a SIGKILL right after leaves a name.
	if err := rec.RecordFirewall(n.Table(), nil); err != nil {
		return nil, err
	}
	fw, err := netfault.New(n.runID)
	if err != nil {
		_ = rec.ForgetFirewall(n.Table())
		return nil, err
	}
	n.rec, n.fw, n.faults = rec, fw, map[string]string{}
	return fw, nil
}

// change records the faults as they will be once op changed them, then
// runs op; on failure the record is put back.
func (n *network) change(target, fault string, op func() error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.fw == nil {
		return errors.New("the run is ending")
	}
	old, had := n.faults[target]
	set := func(v string, on bool) {
		if on {
			n.faults[target] = v
		} else {
			delete(n.faults, target)
		}
	}
	set(fault, fault != "")
	if err := n.rec.RecordFirewall(n.Table(), n.inForce()); err != nil {
		set(old, had)
		return err
	}
	if err := op(); err != nil {
		set(old, had)
		_ = n.rec.RecordFirewall(n.Table(), n.inForce())
		return err
	}
	return nil
}

func (n *network) inForce() []string {
	var out []string
	for _, f := range n.faults {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// close deletes the table (every rule in it: every partition healed) and
// its record; later network faults are refused. Safe to call more than once.
func (n *network) close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.fw == nil {
		return nil
	}
	if err := n.fw.Close(); err != nil {
		return fmt.Errorf("delete firewall table inet %s: %w (`p2pfault cleanup` deletes it)", n.Table(), err)
	}
	n.fw = nil
	return n.rec.ForgetFirewall(n.Table())
}

// netView is the run's table as the network kinds see it (fault.Network):
// each change recorded first.
type netView struct {
	n  *network
	fw *netfault.Firewall
}

func (v netView) Partition(target string, ports ...int) error {
	return v.n.change(target, fault.ActionPartition+" "+target, func() error { return v.fw.Partition(target, ports...) })
}

func (v netView) Loss(target string, pct int, ports ...int) error {
	return v.n.change(target, fmt.Sprintf("%s %d%% %s", fault.ActionLoss, pct, target), func() error { return v.fw.Loss(target, pct, ports...) })
}

func (v netView) Heal(target string) error {
	err := v.n.change(target, "", func() error { return v.fw.Heal(target) })
	if err != nil && v.n.isClosed() {
		return nil // the run's end deleted the table: healed
	}
	return err
}

func (n *network) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// Network is the run's packet filter for the network kinds (fault.NetEnv).
func (f *firing) Network() (fault.Network, error) {
	cl := f.e.run.cluster()
	if cl == nil {
		return nil, errors.New("the cluster is not up yet")
	}
	if nf, ok := cl.(NetFaulter); ok {
		return nf.FaultNetwork()
	}
	fw, err := f.e.net.get(cl)
	if err != nil {
		return nil, err
	}
	return netView{n: f.e.net, fw: fw}, nil
}

var _ fault.NetEnv = (*firing)(nil)

// closeNetwork is Run's deferred end for the firewall, before the cluster
// stops: the table goes on every way out of Run (a panic included).
func (e *Experiment) closeNetwork(err *error) {
	if cerr := e.net.close(); cerr != nil {
		e.emit(event.Event{Kind: event.KindWarning, Message: cerr.Error()})
		if *err == nil {
			*err = cerr
		}
	}
}
