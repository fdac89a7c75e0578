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
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"p2pfault/netenv"
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
	wake   chan struct{} // closed and replaced at every change: waiters re-check
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
		wake:   make(chan struct{}),
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

// changed wakes every waiter; f.mu is held.
func (f *Fabric) changed() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// wait releases f.mu until the fabric changes, until is reached (zero:
// never) or done is closed, then takes f.mu again.
func (f *Fabric) wait(until time.Time, done <-chan struct{}) {
	ch := f.wake
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
	f.mu.Unlock()
	select {
	case <-ch:
	case <-tc:
	case <-done:
	}
	f.mu.Lock()
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

// Host is one process on the fabric: a netenv.Network whose listeners and
// connections it owns, and the target of SIGSTOP/SIGCONT/SIGKILL.
type Host struct {
	f      *Fabric
	id     int
	name   string
	frozen bool
	gen    int // incarnation: Crash starts a new one
	ends   map[*conn]bool
	lns    map[*listener]bool
}

var _ netenv.Network = (*Host)(nil)

func (h *Host) String() string { return h.name }

// Freeze stops the host as SIGSTOP does: its own calls (and Wait) block
// until Thaw; its kernel side (backlog, receive buffers) goes on.
func (h *Host) Freeze() {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.frozen = true
	h.f.changed()
}

// Thaw resumes a frozen host, as SIGCONT does.
func (h *Host) Thaw() {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.frozen = false
	h.f.changed()
}

// Frozen reports whether the host is frozen.
func (h *Host) Frozen() bool {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.frozen
}

// Wait blocks while the host is frozen: the gate a goroutine of the host's
// process passes after each wake-up that is not I/O on the host (a timer,
// a ticker), so it stops at its next step as under SIGSTOP. A Crash
// releases it.
func (h *Host) Wait() {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	for h.frozen {
		h.f.wait(time.Time{}, nil)
	}
}

// Crash kills the host as SIGKILL does: the kernel closes what the
// process owned. A connection with unread bytes on the dead side resets
// (the peer's reads and writes fail with ECONNRESET), one without gets a
// FIN (the peer reads EOF after what was sent, and its writes then fail
// with EPIPE), each once it reaches the peer: at once, or at Heal under a
// partition. Its listeners close, their unaccepted connects reset, and
// connects to their ports are refused until something listens again. The
// host is thawed and may be used again (a restart on the same ports).
func (h *Host) Crash() {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	h.die(func(net.Addr) bool { return true })
	h.frozen = false
	h.gen++
	f.changed()
}

// die ends the listeners and connections whose local address matches, as
// the kernel does for a process that died; f.mu is held.
func (h *Host) die(match func(net.Addr) bool) {
	for ln := range h.lns {
		if match(ln.addr) {
			ln.close()
		}
	}
	for c := range h.ends {
		if !match(c.laddr) {
			continue
		}
		c.drop()
		if c.in.buffered > 0 {
			c.out.rst = true
		} else {
			h.f.push(c.out, nil, true)
		}
	}
}

// Pipe returns the two ends of a connection inside the host (a
// socketpair): both freeze and die with it.
func (h *Host) Pipe() (net.Conn, net.Conn) { return h.PipeTo(h) }

// PipeTo returns the two ends of a pipe between h's process and peer's (a
// socketpair a parent shares with its child): the first end is h's, the
// second peer's. Each end blocks while its own host is frozen (bytes
// written to a frozen end's host wait in the buffer, as in the kernel's
// pipe), and a Crash of either host ends its end as its death would (the
// other end reads EOF, or a reset with unread bytes). A pipe is no network
// path: no partition or loss acts on it.
func (h *Host) PipeTo(peer *Host) (net.Conn, net.Conn) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	a, b := f.newPair(h, peer, pipeAddr(h.name), pipeAddr(peer.name))
	// Cuts and loss are looked up by the streams' hosts; a pipe's streams
	// name none, so none applies (as between a host and itself).
	for _, s := range []*stream{a.in, a.out} {
		s.from, s.to = nil, nil
	}
	return a, b
}

type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) + ":pipe" }

func parseAddr(op, network, address string) (net.IP, int, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, 0, &net.OpError{Op: op, Net: network, Err: net.UnknownNetworkError(network)}
	}
	host, ps, err := net.SplitHostPort(address)
	if err != nil {
		return nil, 0, &net.OpError{Op: op, Net: network, Err: err}
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return nil, 0, &net.OpError{Op: op, Net: network, Err: &net.AddrError{Err: "invalid port", Addr: address}}
	}
	var ip net.IP
	switch host {
	case "":
	case "localhost":
		ip = net.IPv4(127, 0, 0, 1)
	default:
		if ip = net.ParseIP(host); ip == nil {
			return nil, 0, &net.OpError{Op: op, Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
		}
	}
	return ip, port, nil
}

// Listen announces on "host:port" of the fabric (port 0: a free one).
func (h *Host) Listen(network, address string) (net.Listener, error) {
	ip, port, err := parseAddr("listen", network, address)
	if err != nil {
		return nil, err
	}
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for h.frozen {
		f.wait(time.Time{}, nil)
	}
	if ip == nil {
		ip = net.IPv4zero
	}
	if port == 0 {
		if port, err = f.ephemeralPort(); err != nil {
			return nil, &net.OpError{Op: "listen", Net: network, Err: os.NewSyscallError("bind", err)}
		}
	}
	addr := &net.TCPAddr{IP: ip, Port: port}
	if f.ports[port] != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	ln := &listener{f: f, host: h, addr: addr}
	f.ports[port] = ln
	f.owners[port] = h
	h.lns[ln] = true
	f.changed()
	return ln, nil
}

// DialContext connects to "host:port" on the fabric; ctx bounds the
// connect (a connect into a partition hangs until it ends).
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ip, port, err := parseAddr("dial", network, address)
	if err != nil {
		return nil, err
	}
	raddr := &net.TCPAddr{IP: ip, Port: port}
	fail := func(err error) error { return &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err} }
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for h.frozen {
		f.wait(time.Time{}, nil)
	}
	gen := h.gen
	start := time.Now()
	next := start // when the next SYN goes out
	tries := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, fail(err)
		}
		if h.gen != gen {
			return nil, fail(net.ErrClosed) // the process died mid-connect
		}
		if h.frozen {
			f.wait(time.Time{}, nil)
			continue
		}
		if time.Now().Before(next) {
			f.wait(next, ctx.Done())
			continue
		}
		if tries > synRetries { // the last SYN's timeout ran out too
			return nil, fail(os.NewSyscallError("connect", syscall.ETIMEDOUT))
		}
		ln := f.lookup(ip, port)
		owner := f.owners[port]
		if ln != nil {
			owner = ln.host
		}
		// A SYN goes out now. It vanishes into a partition, is lost with
		// the path's loss, or is dropped by a full backlog; the kernel
		// sends it again later.
		// The dialer's end has no port yet: only a cut of its whole host
		// or of the port dialled catches the SYN (a port cut catches it
		// even where nobody listens, as a rule's dport match does).
		from, to := end{h: h}, end{h: owner, port: port}
		lost := f.cuts[pair{h, nil}] || f.cut(from, to) || (owner != nil && f.rng.Float64() < f.lossOf(from, to)) ||
			(ln != nil && len(ln.backlog) >= Backlog)
		if lost {
			tries++
			next = start.Add(SYNTimeout * time.Duration(1<<tries-1))
			continue
		}
		if ln == nil {
			return nil, fail(os.NewSyscallError("connect", syscall.ECONNREFUSED))
		}
		lport, err := f.ephemeralPort()
		if err != nil {
			return nil, fail(os.NewSyscallError("connect", err))
		}
		lip := ln.addr.IP
		if lip.IsUnspecified() {
			lip = net.IPv4(127, 0, 0, 1)
		}
		c, s := f.newPair(h, ln.host, &net.TCPAddr{IP: lip, Port: lport}, &net.TCPAddr{IP: lip, Port: port})
		ln.backlog = append(ln.backlog, s)
		f.changed()
		return c, nil
	}
}

// listener is a bound port; its backlog holds connects not yet accepted.
type listener struct {
	f       *Fabric
	host    *Host
	addr    *net.TCPAddr
	backlog []*conn
	closed  bool
}

func (l *listener) Accept() (net.Conn, error) {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if l.closed {
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		}
		if l.host.frozen || len(l.backlog) == 0 {
			f.wait(time.Time{}, nil)
			continue
		}
		c := l.backlog[0]
		l.backlog = l.backlog[1:]
		f.changed()
		return c, nil
	}
}

func (l *listener) Close() error {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	if l.closed {
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	l.close()
	l.f.changed()
	return nil
}

// close unbinds l; connects never accepted are reset, as the kernel does.
func (l *listener) close() {
	l.closed = true
	if l.f.ports[l.addr.Port] == l {
		delete(l.f.ports, l.addr.Port)
	}
	delete(l.host.lns, l)
	for _, c := range l.backlog {
		if !c.closed {
			c.drop()
			c.out.rst = true
		}
	}
	l.backlog = nil
}

func (l *listener) Addr() net.Addr { return l.addr }

// stream is one direction of a connection: the bytes the sender wrote that
// the receiver has not read, in order.
type stream struct {
	from, to   *Host
	fromPort   int // the sender's local port (0: a pipe)
	toPort     int // the receiver's
	segs       []seg
	arrived    int       // segs[:arrived] are in the receiver's buffer
	off        int       // bytes of segs[0] already read
	buffered   int       // unread bytes, arrived or not: bounded by SocketBuffer
	last       time.Time // the latest arrival queued: TCP delivers in order
	rst        bool      // the sender died: a reset is on its way
	rstArrived bool
	eof        bool // the sender's FIN arrived
}

// src and dst are the stream's sending and receiving ends.
func (s *stream) src() end { return end{s.from, s.fromPort} }
func (s *stream) dst() end { return end{s.to, s.toPort} }

type seg struct {
	b    []byte
	fin  bool
	sent time.Time // when it was written: retransmissions count from it
	at   time.Time // when it arrives, unless partitioned
}

// push queues b (or a FIN) on s, delayed by loss; f.mu is held.
func (f *Fabric) push(s *stream, b []byte, fin bool) {
	now := time.Now()
	at := now.Add(f.retransmitDelay(s.src(), s.dst(), RTOMin))
	if at.Before(s.last) {
		at = s.last
	}
	s.last = at
	s.segs = append(s.segs, seg{b: b, fin: fin, sent: now, at: at})
	s.buffered += len(b)
}

// conn is one end of a connection, owned by host.
type conn struct {
	f            *Fabric
	host         *Host
	peer         *conn
	in, out      *stream
	laddr, raddr net.Addr
	closed       bool
	rdl, wdl     time.Time
}

// deliver moves what is due on c's incoming stream into its buffer, unless
// a partition holds it; f.mu is held.
func (c *conn) deliver() {
	s := c.in
	if c.f.cut(s.src(), s.dst()) {
		return
	}
	now := time.Now()
	for s.arrived < len(s.segs) && !s.segs[s.arrived].at.After(now) {
		if s.segs[s.arrived].fin {
			s.eof = true
		}
		s.arrived++
	}
	if s.rst {
		s.rstArrived = true
	}
}

// drop closes c without a FIN (its process died); f.mu is held.
func (c *conn) drop() {
	c.closed = true
	delete(c.f.conns, c)
	delete(c.host.ends, c)
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: err}
}

func reset(op string) error { return os.NewSyscallError(op, syscall.ECONNRESET) }

// until is the earlier of a deadline and t (zero: none).
func until(deadline, t time.Time) time.Time {
	if deadline.IsZero() || (!t.IsZero() && t.Before(deadline)) {
		return t
	}
	return deadline
}

func (c *conn) Read(b []byte) (int, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if c.closed {
			return 0, c.opErr("read", net.ErrClosed)
		}
		if c.host.frozen {
			f.wait(time.Time{}, nil)
			continue
		}
		c.deliver()
		s := c.in
		if s.rstArrived {
			return 0, c.opErr("read", reset("read"))
		}
		if s.arrived > 0 {
			sg := &s.segs[0]
			if sg.fin {
				return 0, io.EOF
			}
			n := copy(b, sg.b[s.off:])
			s.off += n
			s.buffered -= n
			if s.off == len(sg.b) {
				s.segs, s.arrived, s.off = s.segs[1:], s.arrived-1, 0
			}
			f.changed() // room for the writer
			return n, nil
		}
		if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		var next time.Time
		if s.arrived < len(s.segs) && !f.cut(s.src(), s.dst()) {
			next = s.segs[s.arrived].at
		}
		f.wait(until(c.rdl, next), nil)
	}
}

func (c *conn) Write(b []byte) (int, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for {
		if c.closed {
			return n, c.opErr("write", net.ErrClosed)
		}
		if c.host.frozen {
			f.wait(time.Time{}, nil)
			continue
		}
		c.deliver() // a reset or FIN from the peer
		if c.in.rstArrived {
			return n, c.opErr("write", reset("write"))
		}
		if c.in.eof && c.peer.closed {
			return n, c.opErr("write", os.NewSyscallError("write", syscall.EPIPE))
		}
		if n == len(b) {
			return n, nil
		}
		if !c.wdl.IsZero() && !time.Now().Before(c.wdl) {
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if room := SocketBuffer - c.out.buffered; room > 0 {
			k := min(room, len(b)-n)
			f.push(c.out, append([]byte(nil), b[n:n+k]...), false)
			n += k
			f.changed()
			continue
		}
		f.wait(c.wdl, nil)
	}
}

// Close sends a FIN after what is buffered; unread bytes are dropped.
func (c *conn) Close() error {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.closed {
		return c.opErr("close", net.ErrClosed)
	}
	c.drop()
	f.push(c.out, nil, true)
	c.in.segs, c.in.arrived, c.in.off, c.in.buffered = nil, 0, 0, 0
	f.changed()
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.laddr }
func (c *conn) RemoteAddr() net.Addr { return c.raddr }

func (c *conn) SetDeadline(t time.Time) error      { return c.setDeadline(t, true, true) }
func (c *conn) SetReadDeadline(t time.Time) error  { return c.setDeadline(t, true, false) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.setDeadline(t, false, true) }

// setDeadline sets the read and/or write deadline and wakes whoever waits
// on the connection, so a deadline moved into the past aborts a blocked
// call (net/http does that to end a read).
func (c *conn) setDeadline(t time.Time, read, write bool) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if read {
		c.rdl = t
	}
	if write {
		c.wdl = t
	}
	c.f.changed()
	return nil
}
