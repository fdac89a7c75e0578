// Package netfault cuts a source off the network, or drops a share of its
// packets, through the kernel's firewall (nftables, spoken over netlink with
// github.com/google/nftables: no `nft` binary is needed).
//
// # Why a table per run
//
// Each run owns one nftables table, named for the run ("p2pfault_" + run
// id, see TableName) and its owner, the p2pfault process that made it (pid
// and start time, see OwnedRunID), and touches nothing else on the host: other tables,
// other runs' tables and the host's own firewall are never read for
// changes, flushed or deleted. Two runs on one host therefore never undo
// each other's faults, and a table left behind by a run that was SIGKILLed
// is recognisable by its prefix (Tables) and removable by its name
// (DeleteTable), which the run records before it creates the table; its
// name says whose it is (TableOwner), so one whose owner is gone is found
// even when no record names it (`p2pfault cleanup --orphans`).
//
// The table is of family inet, so one set of chains sees IPv4 and IPv6
// alike: an engine bound to 127.0.0.1 and a client dialling "localhost"
// that resolves to ::1 are both caught, with no second table to keep in
// step.
//
// # How rules match
//
// A fault on a target is two base chains of its own, "in_<target>" on the
// input hook and "out_<target>" on the output hook, both at priority raw
// (-300: before conntrack and NAT, so the ports matched are the ports the
// processes use) with policy accept. The input chain drops packets arriving
// at the target's ports, the output chain packets leaving them, as a
// firewall on the target's own host cutting its link would:
//
//	in_<target>:  meta iifname "lo" meta l4proto tcp th dport PORT counter drop
//	out_<target>: meta oifname "lo" meta l4proto tcp th sport PORT counter drop
//
// one rule per port in each chain. On loopback every packet crosses both
// hooks (output, then input), so splitting by direction is what makes each
// packet judged exactly once: with both port matches in both chains a loss
// of 30% would drop 1-0.7² = 51% of the packets. Both directions of every
// connection to the ports are still caught: requests and SYNs at input,
// replies and SYN-ACKs at output.
//
// A loss fault inserts "numgen random mod 100 < PCT" before the counter,
// so each packet is dropped with probability PCT/100, independently. The
// verdict is a plain drop, never a reject: the peer sees no RST and no
// ICMP, its connects hang on unanswered SYNs and established connections
// go silent, as when a host drops off the network. Only TCP on the
// loopback interface is matched: the engines p2pfault starts listen on
// loopback. Each rule carries a comment naming the run's fault, readable
// with `nft list table inet p2pfault_<id>`.
//
// # How it is undone
//
// Heal deletes the target's two chains (the kernel deletes their rules
// with them) in one netlink transaction, so a target is never half healed.
// A new fault on a target that has one replaces it in one transaction.
// Close deletes the whole table. After a crash, DeleteTable deletes a
// table by the name the run recorded.
package netfault

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"p2pfault/owner"
)

// TablePrefix starts the name of every table p2pfault creates.
const TablePrefix = "p2pfault_"

// Kind is a network fault's kind.
type Kind string

const (
	KindPartition Kind = "partition" // every packet dropped
	KindLoss      Kind = "loss"      // a share of the packets dropped at random
)

// Fault is the network fault in force on one target.
type Fault struct {
	Target  string
	Kind    Kind
	Percent int   // the share dropped, 100 for a partition
	Ports   []int // TCP ports matched, as source and as destination
}

// ErrNoFault is returned by Heal for a target with no fault in force.
var ErrNoFault = errors.New("no network fault in force")

var (
	runIDRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	targetRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// unsafeName is what OwnedRunID replaces in a run's name.
var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// ownedRe finds the owner a run id carries (OwnedRunID): -PID.TICKS.NS- then
// the random part, at its end.
var ownedRe = regexp.MustCompile(`-([0-9]+\.[0-9]+(?:\.[0-9]+)?)-[0-9a-f]{6}$`)

// OwnedRunID is a run id that names its owner, so its table's name does:
// NAME-PID.TICKS.NS-RANDOM (main-partition-4242.981234.4026531836-a1b2c3),
// NAME made of letters, digits, '.', '_' and '-' and cut short to keep the
// id within 128 characters. A table whose owner is gone (owner.ID.Gone) is an
// orphan, found by its name alone when no record names it (TableOwner).
func OwnedRunID(name string, o owner.ID) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	tail := "-" + o.Tag() + "-" + hex.EncodeToString(b)
	if o.StartTicks == 0 { // an owner without a start time is named by pid only: never an orphan's
		tail = "-" + strconv.Itoa(o.Pid) + "-" + hex.EncodeToString(b)
	}
	name = strings.TrimLeft(unsafeName.ReplaceAllString(name, "_"), "_.-") // an id starts with a letter or digit
	if name == "" {
		name = "run"
	}
	if max := 128 - len(tail); len(name) > max {
		name = name[:max]
	}
	return name + tail
}

// TableOwner is the owner a p2pfault table's name carries (OwnedRunID);
// ok is false for a name that carries none (one made before names carried
// their owner, or not p2pfault's).
func TableOwner(table string) (o owner.ID, ok bool) {
	id, found := strings.CutPrefix(table, TablePrefix)
	if !found {
		return owner.ID{}, false
	}
	m := ownedRe.FindStringSubmatch(id)
	if m == nil {
		return owner.ID{}, false
	}
	return owner.ParseTag(m[1])
}

// TableName is the name of the table a run with this id owns. A run records
// it (e.g. in sessions.json) before New creates the table, so that a crash
// at any point after leaves a name to clean up.
func TableName(runID string) string { return TablePrefix + runID }

// Firewall is one run's table. Its methods are safe for concurrent use.
type Firewall struct {
	mu     sync.Mutex
	table  *nftables.Table
	faults map[string]Fault
	closed bool
}

// New checks the rights and the kernel (see Check) and creates the run's
// table, empty. It fails if a table of that name exists already: another
// run with the same id, or one that crashed (see DeleteTable).
func New(runID string) (*Firewall, error) {
	if !runIDRe.MatchString(runID) {
		return nil, fmt.Errorf("run id %q for a firewall table: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", runID)
	}
	if err := Check("network faults"); err != nil {
		return nil, err
	}
	t := &nftables.Table{Name: TableName(runID), Family: nftables.TableFamilyINet}
	names, err := Tables()
	if err != nil {
		return nil, err
	}
	if slices.Contains(names, t.Name) {
		return nil, fmt.Errorf("firewall table inet %s exists already: another run with id %q holds it, or one that crashed left it (`p2pfault cleanup` deletes it)", t.Name, runID)
	}
	c := &nftables.Conn{}
	c.CreateTable(t)
	if err := c.Flush(); err != nil {
		return nil, classify("create firewall table inet "+t.Name, err)
	}
	return &Firewall{table: t, faults: make(map[string]Fault)}, nil
}

// Table is the name of the firewall's table.
func (f *Firewall) Table() string { return f.table.Name }

// Partition drops every TCP packet to or from ports on the loopback
// interface, both directions, with no reset. A fault already in force on
// target is replaced.
func (f *Firewall) Partition(target string, ports ...int) error {
	return f.apply(Fault{Target: target, Kind: KindPartition, Percent: 100, Ports: ports})
}

// Loss drops pct percent (1 to 100) of those packets, each independently at
// random. A fault already in force on target is replaced.
func (f *Firewall) Loss(target string, pct int, ports ...int) error {
	if pct < 1 || pct > 100 {
		return fmt.Errorf("loss of %d%% on %s: want a share from 1%% to 100%%", pct, target)
	}
	return f.apply(Fault{Target: target, Kind: KindLoss, Percent: pct, Ports: ports})
}

// Heal deletes target's rules. It returns an error wrapping ErrNoFault if
// target has none.
func (f *Firewall) Heal(target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("heal %s: firewall table %s is closed", target, f.table.Name)
	}
	if _, ok := f.faults[target]; !ok {
		return fmt.Errorf("heal %s: %w", target, ErrNoFault)
	}
	c := &nftables.Conn{}
	for _, ch := range f.chains(target) {
		c.DelChain(ch)
	}
	if err := c.Flush(); err != nil {
		return classify("heal "+target+" in table "+f.table.Name, err)
	}
	delete(f.faults, target)
	return nil
}

// Faults lists the faults in force, by target.
func (f *Firewall) Faults() []Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Fault, 0, len(f.faults))
	for _, flt := range f.faults {
		flt.Ports = slices.Clone(flt.Ports)
		out = append(out, flt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// Dropped is the number of packets target's rules have dropped since its
// fault was put in force (0 with none).
func (f *Firewall) Dropped(target string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.faults[target]; !ok || f.closed {
		return 0, nil
	}
	c := &nftables.Conn{}
	var n uint64
	for _, ch := range f.chains(target) {
		rules, err := c.GetRules(f.table, ch)
		if err != nil {
			return 0, classify("read counters of "+target+" in table "+f.table.Name, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					n += ctr.Packets
				}
			}
		}
	}
	return n, nil
}

// Close deletes the table with every rule in it. It may be called more
// than once; a table someone else deleted meanwhile is not an error.
func (f *Firewall) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if _, err := DeleteTable(f.table.Name); err != nil {
		return err
	}
	f.closed = true
	f.faults = nil
	return nil
}

func (f *Firewall) apply(flt Fault) error {
	if !targetRe.MatchString(flt.Target) {
		return fmt.Errorf("%s target %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", flt.Kind, flt.Target)
	}
	if len(flt.Ports) == 0 {
		return fmt.Errorf("%s %s: no ports given", flt.Kind, flt.Target)
	}
	flt.Ports = slices.Clone(flt.Ports)
	slices.Sort(flt.Ports)
	flt.Ports = slices.Compact(flt.Ports)
	for _, p := range flt.Ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("%s %s: port %d is not a TCP port (1 to 65535)", flt.Kind, flt.Target, p)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("%s %s: firewall table %s is closed", flt.Kind, flt.Target, f.table.Name)
	}
	c := &nftables.Conn{}
	chains := f.chains(flt.Target)
	if _, ok := f.faults[flt.Target]; ok {
		// Replace in the same transaction: the old chains go and the new
		// ones come at one instant, with no gap and no overlap.
		for _, ch := range chains {
			c.DelChain(ch)
		}
	}
	for i, ch := range chains {
		c.AddChain(ch)
		in := i == 0 // the input chain matches destination ports
		for _, p := range flt.Ports {
			c.AddRule(&nftables.Rule{Table: f.table, Chain: ch, Exprs: ruleExprs(in, p, flt.Percent),
				UserData: userdata.AppendString(nil, userdata.TypeComment, comment(flt, p, in))})
		}
	}
	if err := c.Flush(); err != nil {
		return classify(fmt.Sprintf("%s %s in table %s", flt.Kind, flt.Target, f.table.Name), err)
	}
	f.faults[flt.Target] = flt
	return nil
}

// chains are target's input and output chains (not yet in the kernel,
// necessarily).
func (f *Firewall) chains(target string) [2]*nftables.Chain {
	accept := nftables.ChainPolicyAccept
	mk := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: f.table, Type: nftables.ChainTypeFilter,
			Hooknum: hook, Priority: nftables.ChainPriorityRaw, Policy: &accept}
	}
	return [2]*nftables.Chain{mk("in_"+target, nftables.ChainHookInput), mk("out_"+target, nftables.ChainHookOutput)}
}

func comment(flt Fault, port int, dport bool) string {
	dir := "sport"
	if dport {
		dir = "dport"
	}
	if flt.Kind == KindLoss {
		return fmt.Sprintf("p2pfault loss %d%% %s tcp %s %d", flt.Percent, flt.Target, dir, port)
	}
	return fmt.Sprintf("p2pfault partition %s tcp %s %d", flt.Target, dir, port)
}

// ruleExprs is one rule: on lo, TCP, then on input the destination port
// (iifname, bytes 2-3 of the TCP header) and on output the source port
// (oifname, bytes 0-1), then for pct < 100 a random draw, then a counter
// and drop.
func ruleExprs(input bool, port, pct int) []expr.Any {
	ifKey, offset := expr.MetaKeyOIFNAME, uint32(0)
	if input {
		ifKey, offset = expr.MetaKeyIIFNAME, 2
	}
	ex := []expr.Any{
		&expr.Meta{Key: ifKey, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offset, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(port))},
	}
	if pct < 100 {
		// numgen leaves a host-order 32-bit number in the register and
		// cmp compares bytes, so turn it to network order first (what
		// `nft` emits for "numgen random mod 100 < PCT").
		ex = append(ex,
			&expr.Numgen{Register: 1, Modulus: 100, Type: unix.NFT_NG_RANDOM},
			&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
			&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: binaryutil.BigEndian.PutUint32(uint32(pct))},
		)
	}
	return append(ex, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop})
}

// ifname is an interface name as meta iifname/oifname loads it: IFNAMSIZ
// bytes, NUL-padded.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// Host is this host's nftables as a run's record of its tables uses it
// (runner.Tables): list p2pfault's tables, delete one.
type Host struct{}

// List is Tables.
func (Host) List() ([]string, error) { return Tables() }

// Delete is DeleteTable.
func (Host) Delete(name string) (bool, error) { return DeleteTable(name) }

// Tables lists the names of p2pfault's tables in the kernel, every run's:
// for tests, and to warn about tables a crashed run left behind.
func Tables() ([]string, error) {
	c := &nftables.Conn{}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, classify("list firewall tables", err)
	}
	var out []string
	for _, t := range ts {
		if len(t.Name) > len(TablePrefix) && t.Name[:len(TablePrefix)] == TablePrefix {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DeleteTable deletes p2pfault's table name (as TableName made it), with
// every rule in it, and reports whether it was there. It refuses a name
// that is not p2pfault's, so a damaged record cannot delete another
// program's table.
func DeleteTable(name string) (deleted bool, err error) {
	if len(name) <= len(TablePrefix) || name[:len(TablePrefix)] != TablePrefix || !runIDRe.MatchString(name[len(TablePrefix):]) {
		return false, fmt.Errorf("firewall table %q is not p2pfault's (want %s<run id>): not deleting it", name, TablePrefix)
	}
	names, err := Tables()
	if err != nil {
		return false, err
	}
	if !slices.Contains(names, name) {
		return false, nil
	}
	c := &nftables.Conn{}
	c.DelTable(&nftables.Table{Name: name, Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil // deleted meanwhile
		}
		return false, classify("delete firewall table inet "+name, err)
	}
	return true, nil
}

// Owner is TableOwner.
func (Host) Owner(name string) (owner.ID, bool) { return TableOwner(name) }
