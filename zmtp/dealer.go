package zmtp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"p2pfault/netenv"
)

// EventKind is what a DEALER's connection did (libzmq's monitor events).
type EventKind int

const (
	// Connected: the TCP connect succeeded (EVENT_CONNECTED); a stopped
	// peer's kernel completes it from its listen backlog.
	Connected EventKind = iota + 1
	// HandshakeSucceeded: the ZMTP handshake finished
	// (EVENT_HANDSHAKE_SUCCEEDED); queued messages go out from here.
	HandshakeSucceeded
	// Disconnected: a connection that was up (TCP connected, handshake
	// done or not) closed (EVENT_DISCONNECTED): what vLLM's monitor
	// watches. Err says why (a heartbeat, EOF, a reset, a protocol error).
	Disconnected
	// ConnectRetried: a dial failed; the next one is after ReconnectIvl
	// (EVENT_CONNECT_RETRIED). vLLM does not watch it.
	ConnectRetried
)

func (k EventKind) String() string {
	switch k {
	case Connected:
		return "connected"
	case HandshakeSucceeded:
		return "handshake-succeeded"
	case Disconnected:
		return "disconnected"
	case ConnectRetried:
		return "connect-retried"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one monitor event of a DEALER.
type Event struct {
	Kind EventKind
	Addr string
	At   time.Time
	Err  error // Disconnected, ConnectRetried: why
}

// eventQueue bounds the events kept for a reader that does not drain
// Events; beyond it new events are dropped (and logged), as a libzmq
// monitor socket at its high-water mark drops them.
const eventQueue = 256

// Dealer is a DEALER: it connects to one address in the background,
// reconnecting after every failure, and sends what was queued in order
// once a connection is up.
type Dealer struct {
	o      Options
	nw     netenv.Network
	out    *pipe
	in     chan delivery
	events chan Event
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once // closes events

	mu     sync.Mutex
	addr   string
	closed bool
	cur    atomic.Pointer[Conn] // the connection up, if one is
	down   atomic.Pointer[Conn] // the last connection that closed, until the next is up
}

// NewDealer returns a DEALER with o's identity; it connects on Connect.
func NewDealer(o Options) *Dealer {
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Dealer{
		o: o, nw: netenv.Or(o.Net), out: newPipe(o.HWM), in: make(chan delivery, o.HWM),
		events: make(chan Event, eventQueue), ctx: ctx, cancel: cancel,
	}
}

// Connect starts connecting to addr ("host:port") and returns at once, as
// zmq_connect does: the dial, the handshake and every reconnect happen in
// the background and are told on Events. A DEALER connects to one address.
func (d *Dealer) Connect(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("zmtp: DEALER connect to %q: %w", addr, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return ErrClosed
	case d.addr != "":
		return fmt.Errorf("zmtp: DEALER connect to %s: already connecting to %s", addr, d.addr)
	}
	d.addr = addr
	d.wg.Add(1)
	go d.run(addr)
	return nil
}

// LastHeard is when the DEALER's connection last received a frame, its
// peer's PONGs included (libzmq counts any traffic as a sign of life);
// zero while no connection is up. The sim's lookup deadline counts from it.
func (d *Dealer) LastHeard() time.Time {
	if c := d.cur.Load(); c != nil {
		if n := c.heardAt.Load(); n != 0 {
			return time.Unix(0, n)
		}
	}
	return time.Time{}
}

// Lost is why the DEALER's last connection closed, from the moment it did
// (its Disconnected event may still be on its way) until the next one is
// up; nil while one is up or none ever was. libzmq's I/O thread posts
// EVENT_DISCONNECTED to the monitor as it reads the FIN, before the
// application polls: a reader that met a message sent after the loss can
// ask here what its monitor already holds.
func (d *Dealer) Lost() error {
	if c := d.cur.Load(); c != nil {
		if err := c.Err(); err != nil {
			return err
		}
		return nil
	}
	if c := d.down.Load(); c != nil {
		return c.Err()
	}
	return nil
}

// Events are the DEALER's monitor events, in order.
func (d *Dealer) Events() <-chan Event { return d.events }

func (d *Dealer) emit(k EventKind, addr string, err error) {
	select {
	case d.events <- Event{Kind: k, Addr: addr, At: time.Now(), Err: err}:
	default:
		d.o.Logf("zmtp: DEALER to %s: event %s dropped: Events not drained", addr, k)
	}
}

// run dials, handshakes and serves one connection at a time until Close.
func (d *Dealer) run(addr string) {
	defer d.wg.Done()
	for first := true; ; first = false {
		if !first && !d.sleep(d.o.ReconnectIvl) {
			return
		}
		nc, err := d.nw.DialContext(d.ctx, "tcp", addr)
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			d.emit(ConnectRetried, addr, err)
			continue
		}
		d.emit(Connected, addr, nil)
		if !d.serve(nc, addr) {
			return
		}
	}
}

// serve runs one connection until it closes (true) or the DEALER does.
func (d *Dealer) serve(nc net.Conn, addr string) bool {
	stop := context.AfterFunc(d.ctx, func() { nc.Close() }) // ends a handshake on Close
	c, err := newConn(nc, TypeDealer, d.o, d.in)
	if !stop() || d.ctx.Err() != nil {
		if c != nil {
			c.Close()
		}
		return false
	}
	if err != nil {
		d.o.Logf("zmtp: DEALER to %s: %v", addr, err)
		d.emit(Disconnected, addr, err)
		return true
	}
	d.emit(HandshakeSucceeded, addr, nil)
	d.down.Store(nil)
	d.cur.Store(c)
	defer d.cur.Store(nil)
	c.start(d.out)
	select {
	case <-c.Done():
		d.down.Store(c)
		c.Close()
		d.emit(Disconnected, addr, c.Err())
		return true
	case <-d.ctx.Done():
		c.Close()
		return false
	}
}

// sleep waits ReconnectIvl, then passes the gate; false on Close.
func (d *Dealer) sleep(ivl time.Duration) bool {
	t := time.NewTimer(ivl)
	defer t.Stop()
	select {
	case <-d.ctx.Done():
		return false
	case <-t.C:
		d.o.Gate()
		return d.ctx.Err() == nil
	}
}

// Send queues payload; it goes out once a connection is up. An error when
// the queue holds HWM messages or the DEALER is closed.
func (d *Dealer) Send(payload []byte) error { return d.send(msg{one: payload}) }

// SendMsg queues a multipart message, as Send does.
func (d *Dealer) SendMsg(parts [][]byte) error {
	m, err := msgOf(parts)
	if err != nil {
		return err
	}
	return d.send(m)
}

func (d *Dealer) send(m msg) error {
	if d.ctx.Err() != nil {
		return ErrClosed
	}
	return d.out.push(m)
}

// RecvMsg returns the next message received on any of the DEALER's
// connections.
func (d *Dealer) RecvMsg(ctx context.Context) ([][]byte, error) {
	m, err := d.recv(ctx)
	return m.all(), err
}

func (d *Dealer) recv(ctx context.Context) (msg, error) {
	select { // the common case, without a blocking select's cost
	case dl := <-d.in:
		return dl.m, nil
	default:
	}
	select {
	case dl := <-d.in:
		return dl.m, nil
	case <-d.ctx.Done():
		return msg{}, ErrClosed
	case <-ctx.Done():
		return msg{}, ctx.Err()
	}
}

// Recv returns the next single-part message; others are logged and
// dropped.
func (d *Dealer) Recv(ctx context.Context) ([]byte, error) {
	for {
		m, err := d.recv(ctx)
		if err != nil {
			return nil, err
		}
		if m.parts == nil {
			return m.one, nil
		}
		d.o.Logf("zmtp: DEALER: dropping a message of %d parts (expected 1)", len(m.parts))
	}
}

// Close ends the connection and every goroutine, and closes Events;
// queued messages are dropped (LINGER 0, as vLLM closes). It is
// idempotent.
func (d *Dealer) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	d.once.Do(func() { close(d.events) }) // run has ended: nothing emits
	return nil
}
