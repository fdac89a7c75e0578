// Package memnet is an in-memory TCP network that behaves, for a simulated
// engine, as the kernel does for a real one, so a whole cluster can run in
// one process inside a testing/synctest bubble on the fake clock.
//
// Contract:
//   - A Fabric is one machine's network (every port in one namespace, as on
//     loopback). Create it inside the bubble that uses it: its channels and
//     timers must belong to the bubble for synctest to see waits as durable.
//   - A Host is one process (one engine, or a client such as the probe): a
//     netenv.Network whose listeners and connections it owns. Its faults act
//     on what it owns: Freeze/Thaw (SIGSTOP/SIGCONT), Crash (SIGKILL).
//   - Fabric.Partition/Heal and Fabric.Loss act between two hosts, or
//     between a host and every other one (b == nil). A pipe (Host.Pipe,
//     Host.PipeTo: between processes of one machine) is not on the network.
//   - Fabric.PartitionPorts/LossPorts/HealPorts act on some ports of the
//     machine, as package netfault's nftables rules do on a real one: a
//     segment (or a SYN) is caught when either end of its connection has
//     one of the listed ports as its local port, whichever host owns it,
//     so the listeners on them are cut and a connection dialled from an
//     ephemeral port to another port is not. A fault is named (netfault's
//     target); a new one by a name replaces the old at one instant.
//   - Every wait blocks on a channel or a timer, never on I/O or a held
//     mutex, so a goroutine waiting here is durably blocked for synctest.
//     A change wakes only the waiters it concerns (a write the reader of
//     the other end, a read that end's writer, a connect the listener's
//     Accept): the cost of moving a byte does not grow with the number of
//     connections. A host's freeze, thaw and crash wake its own waiters,
//     and the fabric-wide faults (Partition, Heal, Loss, the port faults)
//     wake every waiter.
//
// Kernel behaviour modelled (each has a test):
//   - Dial to an address nobody listens on is refused at once (ECONNREFUSED);
//     Listen on an address in use fails (EADDRINUSE); port 0 picks a free
//     ephemeral port, never one handed out just before.
//   - A frozen host's listener still completes connects (they wait in its
//     backlog, accepted after Thaw); bytes written to a frozen host's
//     connection are buffered up to SocketBuffer, then the writer blocks; the
//     frozen host's own Accept/Read/Write/Dial/Listen calls and Wait block
//     until Thaw, even when data is there.
//   - A crashed host's connections are closed by the "kernel": reset where
//     the dead side had unread bytes (ECONNRESET), else a FIN (EOF, then
//     EPIPE on write); its listeners close, connects to them are refused
//     until something listens again (a restart may bind the same address).
//   - A partition makes packets vanish: connects hang until the dialer's
//     ctx ends (or ETIMEDOUT after the kernel's SYN retries), writes fill
//     the buffer and then block, nothing is read; after Heal what was sent
//     arrives with TCP's next retransmission (RTO or SYN backoff).
//   - Loss delays a fraction of segments by TCP's retransmission timeout
//     (see Loss): TCP never loses bytes, it delivers them late and in order.
//   - A port fault (PartitionPorts, LossPorts) acts as a partition or a
//     loss on exactly the packets an nftables rule matching those ports
//     (source or destination port) drops, SYNs to a port nobody listens
//     on included: other ports of the same host, and connections dialled
//     from ephemeral ports to other ports, go on; HealPorts delivers with
//     the next retransmission, as Heal does.
//
// Not modelled: half-close, urgent data, Nagle, window scaling beyond
// SocketBuffer, the RST a close with unread data sends, RTT (a segment
// arrives at once: RTOMin stands for Linux's RTO floor), and the acks a
// partition also holds back (a write's buffer frees as the reader reads).
package memnet

import (
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"
)

// SocketBuffer is how many bytes one direction of a connection holds before
// the writer blocks: the sender's send buffer plus the receiver's receive
// buffer. Linux defaults: net.ipv4.tcp_rmem's default is 131072 bytes and
// tcp_wmem's 16384, grown by autotuning; a peer writing to a stopped reader
// queues on the order of 128-256 KiB before write(2) blocks.
const SocketBuffer = 256 << 10

// Backlog is how many connects a listener holds before it accepts them:
// net.core.somaxconn's default since Linux 5.4. A connect beyond it hangs
// (the kernel drops the SYN and the client retransmits).
const Backlog = 4096

// RTOMin is Linux's minimum retransmission timeout (TCP_RTO_MIN): the delay
// a lost data segment adds before its retransmission arrives.
const RTOMin = 200 * time.Millisecond

// SYNTimeout is Linux's initial retransmission timeout for a SYN
// (TCP_TIMEOUT_INIT): a connect whose SYN is lost sends it again 1, 3, 7,
// 15, 31 and 63 s after the first, and fails with ETIMEDOUT after
// synRetries (net.ipv4.tcp_syn_retries, 6), 127 s after it began.
const SYNTimeout = time.Second

const synRetries = 6

// ephemeral is Linux's default net.ipv4.ip_local_port_range.
const ephemeralLo, ephemeralHi = 32768, 60999

// Fabric is one machine's network: its listeners by port, partitions and
// loss between hosts.
type Fabric struct {
	mu     sync.Mutex
	all    signal // the fabric-wide faults: every waiter re-checks
	wakes  int    // waits ended, for BenchmarkIdleConnsDoNotSlowAPair
	ports  map[int]*listener
	owners map[int]*Host // the host that last bound each port: its SYNs vanish under a partition even when nothing listens
	next   int           // the next ephemeral port to try
	hosts  int
	conns  map[*conn]bool // every end not yet closed
	cuts   map[pair]bool
	loss   map[pair]float64
	pcuts  map[string]portFault // by name: PartitionPorts, LossPorts
	rng    *rand.Rand
}

// portFault is a fault on some ports of the machine: every segment to or
// from them is lost with chance loss (1: a partition).
type portFault struct {
	ports map[int]bool
	loss  float64
}

// end is one end of a path: a host and its local port there (0: a pipe,
// or a connect whose ephemeral port is not chosen yet).
type end struct {
	h    *Host
	port int
}

// holds reports whether pf catches packets at e: by its port alone, as
// an nftables rule's sport/dport match does, whichever host owns it.
func (pf portFault) holds(e end) bool { return e.port != 0 && pf.ports[e.port] }

// pair names two hosts, or a host and everyone (b == nil); a < b by id.
type pair struct{ a, b *Host }

func mkpair(a, b *Host) pair {
	if b != nil && b.id < a.id {
		a, b = b, a
	}
	return pair{a, b}
}

// New returns an empty fabric; seed drives the loss draws. The draws come
// in the order goroutines write, which the scheduler chooses, so the same
// seed gives the same fraction, not necessarily the same segments.
func New(seed uint64) *Fabric {
	return &Fabric{
		ports:  make(map[int]*listener),
		owners: make(map[int]*Host),
		conns:  make(map[*conn]bool),
		next:   ephemeralLo,
		cuts:   make(map[pair]bool),
		loss:   make(map[pair]float64),
		pcuts:  make(map[string]portFault),
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// signal wakes the goroutines waiting on one scope (a connection end's
// readers, its writers, a listener's Accept, a host, the fabric): a
// channel closed at a change and made again by the next waiter, so a
// change nobody waits on costs nothing. f.mu guards it.
type signal struct{ ch chan struct{} }

// wake ends the waits on s; f.mu is held.
func (s *signal) wake() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// c is the channel a waiter on s blocks on; f.mu is held.
func (s *signal) c() <-chan struct{} {
	if s == nil {
		return nil // no scope: a nil channel never fires
	}
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// changed wakes every waiter of the fabric: after a fault that acts
// between hosts or on ports; f.mu is held.
func (f *Fabric) changed() { f.all.wake() }

// wait releases f.mu until s or h's signal (a freeze, thaw or crash of
// the waiter's host) or the fabric's is woken, until is reached (zero:
// never) or done is closed, then takes f.mu again. s may be nil (the
// waiter waits on its host and on the fabric only).
func (f *Fabric) wait(s *signal, h *Host, until time.Time, done <-chan struct{}) {
	var tc <-chan time.Time
	if !until.IsZero() {
		d := time.Until(until)
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	own, host, all := s.c(), h.sig.c(), f.all.c()
	f.mu.Unlock()
	select {
	case <-own:
	case <-host:
	case <-all:
	case <-tc:
	case <-done:
	}
	f.mu.Lock()
	f.wakes++
}

// Host returns a new host (one process) on the fabric; name is for errors.
func (f *Fabric) Host(name string) *Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosts++
	return &Host{f: f, id: f.hosts, name: name, ends: make(map[*conn]bool), lns: make(map[*listener]bool)}
}

// Partition makes packets between a and b vanish (b nil: between a and
// every other host) until Heal.
func (f *Fabric) Partition(a, b *Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliverAll() // what arrived before the cut stays readable
	f.cuts[mkpair(a, b)] = true
	f.changed()
}

// Heal ends Partition(a, b). What was sent meanwhile arrives with the
// sender's next retransmission after the heal: TCP resends the oldest
// unacknowledged segment RTOMin, then 2×, 4×... later (3·RTOMin, 7·RTOMin
// after it was first sent), and what follows it comes with it. A connect
// gets through with its next SYN (see SYNTimeout).
func (f *Fabric) Heal(a, b *Host) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliverAll() // what was due on the streams not cut arrived: it is no retransmission
	delete(f.cuts, mkpair(a, b))
	f.healed()
}

// healed schedules, after a cut ended, what was held on the streams no
// longer cut for the sender's next retransmission (see Heal); f.mu is
// held, and what was due on the streams not cut before the change is
// delivered (deliverAll), so only what the cut held is still due here.
func (f *Fabric) healed() {
	now := time.Now()
	for c := range f.conns {
		s := c.in
		if s.arrived == len(s.segs) || f.cut(s.src(), s.dst()) {
			continue
		}
		head := s.segs[s.arrived]
		if !head.at.Before(now) {
			continue // not due yet: no retransmission was needed
		}
		at := head.sent
		for rto := RTOMin; !at.After(now); rto *= 2 {
			at = at.Add(rto)
		}
		for i := s.arrived; i < len(s.segs); i++ {
			s.segs[i].at = maxTime(s.segs[i].at, at)
		}
		s.last = maxTime(s.last, at)
	}
	f.changed()
}

// PartitionPorts makes the packets to and from ports vanish, as a
// firewall dropping them does (package netfault's rules), until
// HealPorts(name). It replaces a fault of that name.
func (f *Fabric) PartitionPorts(name string, ports ...int) {
	f.setPortFault(name, 1, ports)
}

// LossPorts makes a fraction (0..1) of the segments to and from ports be
// lost as Loss does, until HealPorts(name) (or a fraction of 0). It
// replaces a fault of that name.
func (f *Fabric) LossPorts(name string, fraction float64, ports ...int) {
	if fraction <= 0 {
		f.HealPorts(name)
		return
	}
	f.setPortFault(name, min(fraction, 1), ports)
}

func (f *Fabric) setPortFault(name string, loss float64, ports []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deliverAll() // what arrived before the cut stays readable
	pf := portFault{ports: make(map[int]bool, len(ports)), loss: loss}
	for _, p := range ports {
		pf.ports[p] = true
	}
	f.pcuts[name] = pf
	f.healed() // what the fault it replaces held, and now passes, goes on
}

// HealPorts ends the port fault name (PartitionPorts, LossPorts), with
// Heal's retransmissions; a name with none is no change.
func (f *Fabric) HealPorts(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pcuts[name]; !ok {
		return
	}
	f.deliverAll()
	delete(f.pcuts, name)
	f.healed()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Loss makes a fraction (0..1) of the segments between a and b (b nil: a
// and everyone) be lost, as TCP sees it: a lost data segment arrives
// RTOMin later, lost again with the same chance, each time doubling the
// timeout (exponential backoff), and delays every segment behind it (TCP
// delivers in order); a lost connect attempt is retried after SYNTimeout,
// doubling. 0 ends the loss.
func (f *Fabric) Loss(a, b *Host, fraction float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fraction <= 0 {
		delete(f.loss, mkpair(a, b))
	} else {
		f.loss[mkpair(a, b)] = min(fraction, 1)
	}
	f.changed()
}

// cut reports whether packets between a and b vanish: a partition
// between their hosts, or a port partition on either end.
func (f *Fabric) cut(a, b end) bool {
	if a.h != b.h && (f.cuts[mkpair(a.h, b.h)] || f.cuts[pair{a.h, nil}] || f.cuts[pair{b.h, nil}]) {
		return true
	}
	for _, pf := range f.pcuts {
		if pf.loss >= 1 && (pf.holds(a) || pf.holds(b)) {
			return true
		}
	}
	return false
}

// lossOf is the chance a segment between a and b is lost: the greatest of
// the host losses and the port losses that catch it.
func (f *Fabric) lossOf(a, b end) float64 {
	var p float64
	if a.h != b.h {
		p = max(f.loss[mkpair(a.h, b.h)], f.loss[pair{a.h, nil}], f.loss[pair{b.h, nil}])
	}
	for _, pf := range f.pcuts {
		if pf.loss < 1 && (pf.holds(a) || pf.holds(b)) {
			p = max(p, pf.loss)
		}
	}
	return p
}

// retransmitDelay draws the delay loss adds to one segment (or SYN) whose
// first retransmission comes after rto.
func (f *Fabric) retransmitDelay(a, b end, rto time.Duration) time.Duration {
	p := f.lossOf(a, b)
	var d time.Duration
	for p > 0 && f.rng.Float64() < p && d < time.Minute {
		d += rto
		rto *= 2
	}
	return d
}

// deliverAll moves every segment due by now into its receiver's buffer;
// f.mu is held.
func (f *Fabric) deliverAll() {
	for c := range f.conns {
		c.deliver()
	}
}

// ephemeralPort picks a free port, going round the range so a port just
// freed is not handed out again at once (as Linux does); f.mu is held.
func (f *Fabric) ephemeralPort() (int, error) {
	for range ephemeralHi - ephemeralLo + 1 {
		p := f.next
		if f.next++; f.next > ephemeralHi {
			f.next = ephemeralLo
		}
		if f.ports[p] == nil {
			return p, nil
		}
	}
	return 0, syscall.EADDRNOTAVAIL
}

// lookup is the listener a connect to ip:port reaches; f.mu is held.
func (f *Fabric) lookup(ip net.IP, port int) *listener {
	ln := f.ports[port]
	if ln == nil || ip == nil || ip.IsUnspecified() || ln.addr.IP.IsUnspecified() || ln.addr.IP.Equal(ip) {
		return ln
	}
	return nil
}

// newPair is a connection between a (dialer) and b, registered with both.
func (f *Fabric) newPair(a, b *Host, aAddr, bAddr net.Addr) (*conn, *conn) {
	ap, bp := portOf(aAddr), portOf(bAddr)
	ab := &stream{from: a, to: b, fromPort: ap, toPort: bp}
	ba := &stream{from: b, to: a, fromPort: bp, toPort: ap}
	ca := &conn{f: f, host: a, in: ba, out: ab, laddr: aAddr, raddr: bAddr}
	cb := &conn{f: f, host: b, in: ab, out: ba, laddr: bAddr, raddr: aAddr}
	ca.peer, cb.peer = cb, ca
	for _, c := range []*conn{ca, cb} {
		f.conns[c] = true
		c.host.ends[c] = true
	}
	return ca, cb
}

// portOf is a TCP address's port (0 for a pipe's).
func portOf(a net.Addr) int {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.Port
	}
	return 0
}
