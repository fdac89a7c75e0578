package zmtp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Router is a ROUTER: it accepts connections on a listener, names
// each peer by the Identity of its READY, and routes by that name.
type Router struct {
	ln   net.Listener
	o    Options
	in   chan delivery
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	byID    map[string]*routed
	pending map[net.Conn]bool // handshaking
	conns   map[*Conn]bool
	nextID  uint32
}

// routed is a peer's connection and its queue.
type routed struct {
	c   *Conn
	out *pipe
}

// NewRouter serves ln (which it closes on Close) as a ROUTER.
func NewRouter(ln net.Listener, o Options) *Router {
	o = o.withDefaults()
	r := &Router{
		ln: ln, o: o, in: make(chan delivery, o.HWM), done: make(chan struct{}),
		byID: map[string]*routed{}, pending: map[net.Conn]bool{}, conns: map[*Conn]bool{},
	}
	r.wg.Add(1)
	go r.acceptLoop()
	return r
}

// Addr is the listener's address.
func (r *Router) Addr() net.Addr { return r.ln.Addr() }

func (r *Router) acceptLoop() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			if r.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (EMFILE): libzmq's listener retries too.
			r.o.Logf("zmtp: ROUTER on %s: accept: %v", r.ln.Addr(), err)
			select {
			case <-r.done:
				return
			case <-time.After(r.o.ReconnectIvl):
				r.o.Gate()
			}
			continue
		}
		if !r.track(nc, true) {
			nc.Close()
			return
		}
		r.wg.Add(1)
		go r.serve(nc)
	}
}

func (r *Router) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// track records (or forgets) a connection in its handshake, so Close can
// end it; false once closed.
func (r *Router) track(nc net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.closed {
			return false
		}
		r.pending[nc] = true
	} else {
		delete(r.pending, nc)
	}
	return true
}

// serve runs one connection's handshake and keeps its routing entry while
// it lives.
func (r *Router) serve(nc net.Conn) {
	defer r.wg.Done()
	out := newPipe(r.o.HWM)
	c, err := newConn(nc, TypeRouter, r.o, r.in)
	r.track(nc, false)
	if err != nil {
		r.o.Logf("zmtp: ROUTER on %s: %v", r.ln.Addr(), err)
		return
	}
	ok, dup := r.attach(c, out, false)
	if dup {
		// The old connection's end may be in flight with this one's
		// handshake: libzmq sees it first (its EOF was read before this
		// handshake's round trip ended), so look again a moment later.
		select {
		case <-r.done:
		case <-time.After(inputFirst):
		}
		ok, _ = r.attach(c, out, true)
	}
	if !ok {
		nc.Close()
		return
	}
	c.start(out)
	<-c.Done()
	c.Close()
	r.detach(c)
}

// attach names the peer. A second connection whose identity is already
// routed is kept open (its heartbeats answered) but never routed: its
// messages are dropped, and it stays unnamed even after the first one
// goes (libzmq router.cpp identify_peer with ROUTER_HANDOVER off: "Ignore
// peers with duplicate ID"; the pipe stays in anonymous_pipes and is not
// read again). This is what a reconnecting DEALER's first message meets
// while the ROUTER still holds its old connection. libzmq leaves those
// messages unread in the connection's pipe and, past its high-water mark,
// stops reading that connection (the DEALER's heartbeat then expires);
// here they are dropped as they come, and the connection lives on.
//
// With final false, a duplicate is only reported (dup), not yet attached.
func (r *Router) attach(c *Conn, out *pipe, final bool) (ok, dup bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, false
	}
	id := c.PeerIdentity()
	if len(id) == 0 {
		// libzmq's generated routing id: a zero byte and a counter.
		r.nextID++
		id = binary.BigEndian.AppendUint32([]byte{0}, r.nextID)
	}
	if _, held := r.byID[string(id)]; held {
		if !final {
			return false, true
		}
		c.discard.Store(true)
		if r.o.OnDuplicate != nil {
			r.o.OnDuplicate(id)
		}
		r.o.Logf("zmtp: ROUTER on %s: %s connects with identity %q, already routed to another connection: ignored", r.ln.Addr(), c.RemoteAddr(), id)
	} else {
		c.routingID = id
		r.byID[string(id)] = &routed{c: c, out: out}
	}
	r.conns[c] = true
	return true, false
}

func (r *Router) detach(c *Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
	if rt := r.byID[string(c.routingID)]; rt != nil && rt.c == c {
		delete(r.byID, string(c.routingID))
	}
}

// RecvMsg returns the next message and its sender's identity.
func (r *Router) RecvMsg(ctx context.Context) (identity []byte, parts [][]byte, err error) {
	d, err := r.recv(ctx)
	if err != nil {
		return nil, nil, err
	}
	return d.from.routingID, d.m.all(), nil
}

func (r *Router) recv(ctx context.Context) (delivery, error) {
	select { // the common case, without a blocking select's cost
	case d := <-r.in:
		return d, nil
	default:
	}
	select {
	case d := <-r.in:
		return d, nil
	case <-r.done:
		return delivery{}, ErrClosed
	case <-ctx.Done():
		return delivery{}, ctx.Err()
	}
}

// Recv returns the next single-part message and its sender's identity; a
// message of several parts is logged and dropped, as vLLM's _recv_router
// drops one that is not [identity, payload].
func (r *Router) Recv(ctx context.Context) (identity, payload []byte, err error) {
	for {
		d, err := r.recv(ctx)
		if err != nil {
			return nil, nil, err
		}
		if d.m.parts == nil {
			return d.from.routingID, d.m.one, nil
		}
		r.o.Logf("zmtp: ROUTER on %s: dropping a message of %d parts from %q (expected 1)", r.ln.Addr(), len(d.m.parts), d.from.routingID)
	}
}

// Send queues payload for the peer named identity.
func (r *Router) Send(identity, payload []byte) error {
	return r.send(identity, msg{one: payload})
}

// SendMsg queues a multipart message for the peer named identity: an
// error for an unknown identity (ROUTER_MANDATORY) or a full queue.
func (r *Router) SendMsg(identity []byte, parts [][]byte) error {
	m, err := msgOf(parts)
	if err != nil {
		return err
	}
	return r.send(identity, m)
}

func (r *Router) send(identity []byte, m msg) error {
	r.mu.Lock()
	closed, rt := r.closed, r.byID[string(identity)]
	r.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case rt == nil:
		return fmt.Errorf("send to %q: %w", identity, ErrUnroutable)
	}
	if err := rt.out.push(m); err != nil {
		return fmt.Errorf("send to %q: %w", identity, err)
	}
	return nil
}

// Close closes the listener and every connection, and waits for their
// goroutines. It is idempotent.
func (r *Router) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	close(r.done)
	r.ln.Close()
	for nc := range r.pending {
		nc.Close()
	}
	conns := make([]*Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.fail(ErrClosed)
	}
	r.wg.Wait()
	return nil
}
