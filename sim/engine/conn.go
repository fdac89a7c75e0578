package engine

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"p2pfault/sim/wire"
)

// sendQueue bounds the frames waiting to be written to one peer; a peer
// that lets it fill is not reading and its connection is dropped.
const sendQueue = 1024

// conn is one TCP connection of the control channel. Its reader and writer
// goroutines only move bytes; what the frames mean is decided on ticks.
type conn struct {
	id     uint64
	nc     net.Conn
	out    chan outFrame
	closed bool // set by the stepping goroutine when it closes the conn

	sess   *session // consumer side: the session that dialled it
	peerID string   // producer side: the consumer identity it acked
	// Producer side: the consumer acked this side's own connect
	// (session.py _send_ready); until then replies wait in held.
	acked bool
	held  []wire.Message
}

// outFrame is a frame and when the loop sent it: a step that registered a
// peer (registerPeer) sends what follows only once that work is done, as
// vLLM's loop sends connect_ack after add_remote_peer returns.
type outFrame struct {
	b  []byte
	at time.Time
}

func (e *Engine) newConn(nc net.Conn, sess *session) *conn {
	if e.shut {
		nc.Close()
		return nil
	}
	e.nextConnID++
	c := &conn{id: e.nextConnID, nc: nc, out: make(chan outFrame, sendQueue), sess: sess}
	e.conns[c.id] = c
	e.wg.Add(2)
	go e.readLoop(c)
	go e.writeLoop(c)
	return c
}

func (e *Engine) readLoop(c *conn) {
	defer e.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		payload, err := wire.ReadFrame(br)
		if err != nil {
			e.post(evConnLost{connID: c.id, err: err})
			return
		}
		// A message that does not parse is dropped, the connection kept
		// (vLLM's transport logs and drops what msgspec cannot decode).
		m, err := wire.Decode(payload)
		if !e.post(evFrame{connID: c.id, msg: m, err: err}) {
			return
		}
	}
}

func (e *Engine) writeLoop(c *conn) {
	defer e.wg.Done()
	for f := range c.out {
		if d := time.Until(f.at); d > 0 {
			time.Sleep(d)
		}
		if _, err := c.nc.Write(f.b); err != nil {
			e.post(evConnLost{connID: c.id, err: err})
			for range c.out {
			}
			break
		}
	}
	c.nc.Close()
}

// send queues m to c. Called on the stepping goroutine only.
func (e *Engine) send(c *conn, m wire.Message) {
	if c == nil || c.closed {
		return
	}
	p, err := wire.Encode(m)
	if err == nil {
		p, err = wire.AppendFrame(nil, p)
	}
	if err != nil {
		e.log.Error(compP2P, "encode %s for %s: %v", m.Type, e.connName(c), err)
		return
	}
	f := p
	select {
	case c.out <- outFrame{b: f, at: e.now.Add(e.loopWork)}:
	default:
		e.connLost(c, errors.New("send queue full: peer is not reading"))
	}
}

// serverSend sends a producer's reply on c once the consumer has acked
// this side's connect, as vLLM's session gates every send on _send_ready.
func (e *Engine) serverSend(c *conn, m wire.Message) {
	if !c.acked {
		c.held = append(c.held, m)
		return
	}
	e.send(c, m)
}

// closeConn drops c at once (a session death: vLLM closes the socket).
func (e *Engine) closeConn(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	c.nc.Close()
	close(c.out)
	e.forgetConn(c)
}

// closeAfterFlush closes c once what is queued has been written.
func (e *Engine) closeAfterFlush(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	close(c.out)
	e.forgetConn(c)
}

func (e *Engine) forgetConn(c *conn) {
	delete(e.conns, c.id)
	if c.sess == nil {
		e.dropProducerState(c)
	}
}

// connLost handles a connection that ended under us: EOF, reset, a write
// error or a garbage frame.
func (e *Engine) connLost(c *conn, err error) {
	if c.closed {
		return
	}
	if c.sess != nil {
		s := c.sess
		e.closeConn(c)
		if s.state != sessDead {
			e.killSession(s, lostReason(err))
		}
		return
	}
	if c.peerID != "" {
		e.log.Info(compP2P, "connection from %s closed: %s", c.peerID, lostReason(err))
	}
	e.closeConn(c)
}

func (e *Engine) connName(c *conn) string {
	switch {
	case c.sess != nil:
		return c.sess.peer
	case c.peerID != "":
		return c.peerID
	}
	return c.nc.RemoteAddr().String()
}

// lostReason names why a connection ended in the words an operator expects.
func lostReason(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "connection closed by peer"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	}
	return err.Error()
}
