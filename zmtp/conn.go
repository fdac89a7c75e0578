package zmtp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// inputFirst is how long an expired heartbeat timer waits before it closes
// the connection, so input already waiting is read first: libzmq's I/O
// thread handles ready sockets before its expired timers (epoll.cpp loop),
// so a process resumed after SIGSTOP reads the PINGs in its buffer before
// its own timeout counts. On the fake clock it is a step after everything
// runnable has run.
const inputFirst = time.Millisecond

// delivery is one received message and the connection it came on.
type delivery struct {
	from *Conn
	m    msg
}

// Conn is one ZMTP connection after its handshake: heartbeats run on it
// until it closes, on an error, a heartbeat or Close.
type Conn struct {
	nc       net.Conn
	o        Options
	typ      SocketType
	peer     Metadata
	peerType SocketType
	br       *bufio.Reader

	wmu  sync.Mutex // one message's frames go out together
	wbuf []byte

	in  chan delivery // received messages (shared by a socket's connections)
	ctl chan []byte   // encoded PINGs and PONGs for the control writer

	mu        sync.Mutex
	timeoutAt time.Time   // our PING's deadline for any traffic (zero: none)
	ttlAt     time.Time   // the peer's PING's TTL (zero: none)
	armed     atomic.Bool // timeoutAt or ttlAt is set; written under mu
	rearm     chan struct{}

	heardAt   atomic.Int64 // UnixNano of the last frame received, PONGs too
	discard   atomic.Bool  // a ROUTER's duplicate: its messages are dropped
	dropped   atomic.Int64
	routingID []byte // a ROUTER's name for the peer

	done    chan struct{}
	once    sync.Once
	err     error
	started sync.WaitGroup
}

// NewConn runs the handshake on nc as a socket of type typ with o's
// identity and returns the connection with its heartbeats running. The
// handshake is bounded by o.HandshakeIvl; on an error nc is closed.
func NewConn(nc net.Conn, typ SocketType, o Options) (*Conn, error) {
	o = o.withDefaults()
	c, err := newConn(nc, typ, o, make(chan delivery, 1))
	if err != nil {
		return nil, err
	}
	c.start(nil)
	return c, nil
}

// newConn runs the handshake; the socket names the connection before
// start, so its first message already carries that name.
func newConn(nc net.Conn, typ SocketType, o Options, in chan delivery) (*Conn, error) {
	c := &Conn{
		nc: nc, o: o, typ: typ, br: bufio.NewReaderSize(nc, 64<<10),
		in: in, ctl: make(chan []byte, 4), rearm: make(chan struct{}, 1), done: make(chan struct{}),
	}
	if err := c.handshake(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("zmtp handshake with %s: %w", nc.RemoteAddr(), err)
	}
	return c, nil
}

// start runs the connection's goroutines; out, when set, is the socket's
// queue the connection sends from.
func (c *Conn) start(out *pipe) {
	c.started.Add(3)
	go c.readLoop()
	go c.ctlLoop()
	go c.heartbeatLoop()
	if out != nil {
		c.started.Add(1)
		go c.pump(out)
	}
}

func (c *Conn) handshake() error {
	if err := c.nc.SetDeadline(time.Now().Add(c.o.HandshakeIvl)); err != nil {
		return err
	}
	if _, err := c.nc.Write(appendGreeting(nil)); err != nil {
		return fmt.Errorf("send greeting: %w", err)
	}
	var g [greetingLen]byte
	if _, err := io.ReadFull(c.br, g[:signatureLen]); err != nil {
		return fmt.Errorf("read greeting: %w", timeoutReason(err, c.o.HandshakeIvl))
	}
	if err := checkSignature(g[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c.br, g[signatureLen:]); err != nil {
		return fmt.Errorf("read greeting: %w", timeoutReason(err, c.o.HandshakeIvl))
	}
	if _, err := parseGreeting(g[:]); err != nil {
		return err
	}
	ready := appendMetadata([]byte{5, 'R', 'E', 'A', 'D', 'Y'}, "Socket-Type", string(c.typ), "Identity", string(c.o.Identity))
	if _, err := c.nc.Write(appendFrame(nil, ready, flagCommand)); err != nil {
		return fmt.Errorf("send READY: %w", err)
	}
	if err := c.readReady(); err != nil {
		return err
	}
	return c.nc.SetDeadline(time.Time{})
}

// readReady reads the peer's READY (or ERROR) and checks its socket type.
func (c *Conn) readReady() error {
	f, err := readFrame(c.br, c.o.MaxMsgSize)
	if err != nil {
		return fmt.Errorf("read READY: %w", timeoutReason(err, c.o.HandshakeIvl))
	}
	if !f.command {
		return protoErr("a message before the peer's READY")
	}
	cmd, err := parseCommand(f.body)
	if err != nil {
		return err
	}
	switch cmd.name {
	case "READY":
	case "ERROR":
		return protoErr("peer sent ERROR: %q", errorReason(cmd.data))
	default:
		return protoErr("command %q where READY was due", cmd.name)
	}
	if c.peer, err = parseMetadata(cmd.data); err != nil {
		return err
	}
	c.peerType = SocketType(c.peer.Get("Socket-Type"))
	if !accepts(c.typ, c.peerType) {
		return protoErr("a %s does not talk to a peer of socket type %q", c.typ, c.peerType)
	}
	return nil
}

func errorReason(b []byte) string {
	if len(b) == 0 || len(b) < 1+int(b[0]) {
		return string(b)
	}
	return string(b[1 : 1+int(b[0])])
}

func timeoutReason(err error, ivl time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("not done within the handshake interval %v: %w", ivl, err)
	}
	return err
}

// PeerType is the socket type the peer's READY named.
func (c *Conn) PeerType() SocketType { return c.peerType }

// PeerIdentity is the Identity the peer's READY carried (may be empty).
func (c *Conn) PeerIdentity() []byte { return c.peer.Get("Identity") }

// PeerMetadata is every property of the peer's READY.
func (c *Conn) PeerMetadata() Metadata { return c.peer }

// RemoteAddr is the underlying connection's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Done is closed when the connection has closed; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection closed (nil while it is open).
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// fail closes the connection for reason; the first reason stays.
func (c *Conn) fail(reason error) {
	c.once.Do(func() {
		c.err = reason
		close(c.done)
		c.nc.Close()
		if !errors.Is(reason, ErrClosed) {
			c.o.Logf("zmtp: connection to %s (%s %q) closed: %v", c.nc.RemoteAddr(), c.peerType, c.PeerIdentity(), reason)
		}
	})
}

// Close closes the connection and waits for its goroutines.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.started.Wait()
	return nil
}

// WriteMsg sends one multipart message, all its frames in one write. It
// blocks while the peer does not read (the kernel's buffers are full),
// until the connection closes.
func (c *Conn) WriteMsg(parts [][]byte) error {
	m, err := msgOf(parts)
	if err != nil {
		return err
	}
	return c.write(m)
}

func (c *Conn) write(m msg) error {
	select {
	case <-c.done:
		return c.Err()
	default:
	}
	c.wmu.Lock()
	c.wbuf = appendMsg(c.wbuf[:0], m)
	_, err := c.nc.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // keep no large buffer past a large message
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		return c.Err()
	}
	return nil
}

// ReadMsg returns the next message received, all its parts. Messages
// received before the connection closed are still returned.
func (c *Conn) ReadMsg(ctx context.Context) ([][]byte, error) {
	select {
	case d := <-c.in:
		return d.m.all(), nil
	default:
	}
	select {
	case d := <-c.in:
		return d.m.all(), nil
	case <-c.done:
		return nil, c.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
