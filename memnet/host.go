package memnet

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"p2pfault/netenv"
)

// Host is one process on the fabric: a netenv.Network whose listeners and
// connections it owns, and the target of SIGSTOP/SIGCONT/SIGKILL.
type Host struct {
	f      *Fabric
	id     int
	name   string
	frozen bool
	sig    signal // its freeze, thaw and crash: its waiters re-check
	gen    int    // incarnation: Crash starts a new one
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
	h.sig.wake()
}

// Thaw resumes a frozen host, as SIGCONT does.
func (h *Host) Thaw() {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.frozen = false
	h.sig.wake()
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
		h.f.wait(nil, h, time.Time{}, nil)
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
	h.sig.wake() // a Dial in progress ends, a Wait returns
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
		f.wait(nil, h, time.Time{}, nil)
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
		f.wait(nil, h, time.Time{}, nil)
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
			f.wait(nil, h, time.Time{}, nil)
			continue
		}
		if time.Now().Before(next) {
			f.wait(nil, h, next, ctx.Done())
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
		ln.acc.wake()
		return c, nil
	}
}

// listener is a bound port; its backlog holds connects not yet accepted.
