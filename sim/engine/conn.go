package engine

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"p2pfault/sim/wire"
	"p2pfault/zmtp"
)

// The control channel is laid out as vLLM's control/zmq.py (@13d40492):
// each engine binds one ROUTER at its P2P address, and talks to each peer
// through one DEALER whose identity is its own "host:port", outbound and
// inbound alike. Messages only go DEALER → ROUTER: what the peer sends
// arrives on this engine's ROUTER under the peer's identity, so a reply
// crosses the other TCP connection.

// sendQueue bounds the messages waiting to be handed to one peer's
// DEALER; a peer that lets it fill is not reading and its link is dropped.
const sendQueue = 1024

// linger is how long a link closed after a last message (a reject's
// connect, a disconnect) keeps its DEALER to deliver it, as a closed
// libzmq socket with the default ZMQ_LINGER still sends what is queued
// and then closes its TCP connection. A peer's next link connects only
// after that close, so the peer's ROUTER sees the old connection end
// before the new one's identity (router.cpp ignores a duplicate one).
const linger = 10 * time.Millisecond

// link is this engine's channel to one peer (vLLM's ZmqConnection): the
// DEALER to the peer's ROUTER, and the roles it carries. The peer's
// messages, read from the ROUTER, are handed to the role they are for.
type link struct {
	id     uint64
	peer   string // the peer's identity: its "host:port"
	dealer *zmtp.Dealer
	out    chan outFrame
	abort  atomic.Bool   // closed at once: what is queued is dropped
	done   chan struct{} // the DEALER's connection is closed
	closed bool          // owned by the stepping goroutine
	// lostEarly: a loss was handled before its Disconnected event came
	// (retireLost); that event, the next to come, is then dropped.
	lostEarly bool
	cons      *conn // this engine's session to the peer
	prod      *conn // the peer's session to this engine
}

// conn is one role on a link. Its goroutines only move bytes; what the
// messages mean is decided on steps.
type conn struct {
	id     uint64
	l      *link
	closed bool // set by the stepping goroutine when it closes the conn

	sess   *session // consumer side: the session it carries
	peerID string   // producer side: the consumer identity it acked
	// Producer side: the consumer acked this side's own connect
	// (session.py _send_ready); until then replies wait in held.
	acked bool
	held  []wire.Message
}

// outFrame is a message and when the loop sent it: a step that registered
// a peer (registerPeer) sends what follows only once that work is done, as
// vLLM's loop sends connect_ack after add_remote_peer returns.
type outFrame struct {
	b  []byte
	at time.Time
}

// zmtpOptions are vLLM's socket options (control/zmq.py _apply_heartbeat:
// HEARTBEAT_IVL 2000, HEARTBEAT_TIMEOUT 10000, HEARTBEAT_TTL 10000 ms,
// the engine's --sim-heartbeat-* flags), on the engine's network.
func (e *Engine) zmtpOptions() zmtp.Options {
	return zmtp.Options{
		Identity:         []byte(e.id),
		HeartbeatIvl:     e.cfg.HeartbeatInterval,
		HeartbeatTimeout: e.cfg.HeartbeatTimeout,
		HeartbeatTTL:     e.cfg.HeartbeatTimeout,
		Net:              e.cfg.Net,
		MaxMsgSize:       wire.MaxMessageLen,
		Gate:             e.cfg.Gate,
		// libzmq's own events (a connection closed on an error, a
		// duplicate identity ignored): lines of their own in the log.
		Logf: func(format string, args ...any) { e.log.Info(compZMQ, format, args...) },
		// The ROUTER ignoring a reconnect under a held identity loses its
		// connect as the stale route would: one loss, not two.
		OnDuplicate: func(id []byte) { e.post(evDo{fn: func() { e.lostToRouter(string(id)) }}) },
	}
}

// openLink opens a DEALER to peer ("host:port"); it connects in the
// background and its monitor events come to the steps.
func (e *Engine) openLink(peer string) *link {
	e.nextConnID++
	l := &link{id: e.nextConnID, peer: peer, dealer: zmtp.NewDealer(e.zmtpOptions()),
		out: make(chan outFrame, sendQueue), done: make(chan struct{})}
	e.links[peer] = l
	var prev <-chan struct{}
	if old := e.closing[peer]; old != nil {
		prev = old.done
	}
	e.closing[peer] = l
	e.wg.Add(3)
	go func() {
		defer e.wg.Done()
		if prev != nil {
			select {
			case <-prev:
			case <-l.done:
				return
			}
		}
		if err := l.dealer.Connect(peer); err != nil && !errors.Is(err, zmtp.ErrClosed) {
			// Only a malformed address fails here; the sessions keyed
			// by it die at their handshake deadline.
			e.post(evLink{l: l, ev: zmtp.Event{Kind: zmtp.ConnectRetried, Addr: peer, Err: err}})
		}
	}()
	go e.linkWriter(l)
	go e.linkEvents(l)
	return l
}

func (e *Engine) linkWriter(l *link) {
	defer e.wg.Done()
	defer close(l.done)
	for f := range l.out {
		if l.abort.Load() {
			continue
		}
		if d := time.Until(f.at); d > 0 {
			time.Sleep(d)
		}
		if err := l.dealer.Send(f.b); err != nil && !errors.Is(err, zmtp.ErrClosed) {
			e.post(evLink{l: l, ev: zmtp.Event{Kind: zmtp.Disconnected, Addr: l.peer, Err: err}})
		}
	}
	if !l.abort.Load() {
		time.Sleep(linger)
	}
	// Close ends the TCP connection at once but waits for the DEALER's
	// timers; the peer's next link need not.
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		l.dealer.Close()
	}()
	time.Sleep(linger)
}

func (e *Engine) linkEvents(l *link) {
	defer e.wg.Done()
	for {
		select {
		case ev, ok := <-l.dealer.Events():
			if ok && ev.Kind == zmtp.Disconnected && e.cfg.holdLoss != nil {
				e.cfg.holdLoss()
			}
			if !ok || !e.post(evLink{l: l, ev: ev}) {
				return // closed with the DEALER
			}
		case <-l.done:
			return
		}
	}
}

// routerLoop reads the ROUTER: each message, with its sender's identity,
// is decoded here and handled on a step.
func (e *Engine) routerLoop() {
	defer e.wg.Done()
	for {
		id, p, err := e.router.Recv(e.ctx)
		if err != nil {
			return
		}
		m, err := wire.Decode(p)
		if !e.post(evRouted{peer: string(id), msg: m, err: err}) {
			return
		}
	}
}

// routed hands a message from peer to the role it is for. A message that
// does not parse is logged and dropped (vLLM's transport logs and drops
// what msgspec cannot decode). A connect from a peer with no link opens
// one, as vLLM's transport accepts an inbound connection.
func (e *Engine) routed(peer string, m wire.Message, err error) {
	if err != nil {
		e.log.Warning(compP2P, "dropping a message from %s that does not parse: %v", peer, err)
		return
	}
	l := e.links[peer]
	var c *conn
	switch m.Type {
	case wire.TypeLookupResp, wire.TypeTransferDone, wire.TypeAbortAck:
		if l != nil {
			c = l.cons
		}
	case wire.TypeConnectAck:
		if l != nil && l.cons != nil && l.cons.sess.state != sessReady {
			c = l.cons
		} else if l != nil {
			c = l.prod
		}
	case wire.TypeDisconnect:
		if l != nil && l.cons != nil {
			e.consumerFrame(l.cons, m)
		}
		if l != nil && l.prod != nil {
			e.producerFrame(l.prod, m)
		}
		return
	case wire.TypeConnect:
		l = e.retireLost(l)
		if l != nil && l.cons != nil {
			c = l.cons
			break
		}
		c = e.producerConn(l, peer)
	default: // lookup, fetch, abort_fetch
		if l == nil || l.prod == nil {
			e.log.Warning(compP2P, "%s from %s before its connect was acknowledged: ignored", m.Type, peer)
			return
		}
		c = l.prod
	}
	if c == nil || c.closed {
		return
	}
	if c.sess != nil {
		e.consumerFrame(c, m)
	} else {
		e.producerFrame(c, m)
	}
}

// producerConn is the producer role on peer's link, opened (and the link
// with it) on the peer's first connect.
func (e *Engine) producerConn(l *link, peer string) *conn {
	if e.shut {
		return nil
	}
	if l == nil {
		l = e.openLink(peer)
	}
	if l.prod == nil {
		e.nextConnID++
		l.prod = &conn{id: e.nextConnID, l: l}
	}
	return l.prod
}

// linkEvent is a DEALER's monitor event. EVENT_DISCONNECTED marks the
// connection dead (vLLM's _check_monitors), and its roles are swept now,
// on the step after it. A refused connect is retried by libzmq without an
// event vLLM watches; the sim ends a session's first connect on it
// (MODEL.md, "refused connects").
func (e *Engine) linkEvent(l *link, ev zmtp.Event) {
	if l.closed {
		return
	}
	switch ev.Kind {
	case zmtp.Connected:
		if c := l.cons; c != nil && c.sess.state == sessDialing {
			e.dialed(c.sess)
		}
	case zmtp.ConnectRetried:
		if c := l.cons; c != nil && c.sess.state == sessDialing && errors.Is(ev.Err, syscall.ECONNREFUSED) {
			e.connectRefused(c.sess)
		}
	case zmtp.Disconnected:
		if l.lostEarly {
			l.lostEarly = false
			return
		}
		if c := l.cons; c != nil {
			e.connLost(c, ev.Err)
		}
		if c := l.prod; c != nil {
			e.connLost(c, ev.Err)
		}
	}
}

// retireLost handles the loss of l's connection, if it closed and its
// Disconnected event has not been handled yet, before a connect from its
// peer: it returns l, or nil once the loss closed it. A peer that
// reconnects dialled a new connection after the old one closed (the
// decoder closes its DEALER when it marks a session dead), and under vLLM
// the connect reaches the ROUTER a round trip after that close reached
// this side's DEALER, whose monitor reported it meanwhile; vLLM's poll()
// retires dead connections before routing, so that "a reconnecting
// peer's first message" is not "enqueued into the dead connection"
// (control/zmq.py). The close and the connect reach this loop from two
// goroutines, at one instant after a freeze, in either order: taken in
// the connect's order, a resumed source met the reconnect with the old
// session still handshaken ("duplicate connect after handshake") in some
// runs and accepted it in others.
func (e *Engine) retireLost(l *link) *link {
	if l == nil || l.closed {
		return l
	}
	err := l.dealer.Lost()
	if err == nil {
		return l
	}
	e.linkEvent(l, zmtp.Event{Kind: zmtp.Disconnected, Addr: l.peer, Err: err})
	l.lostEarly = true
	if l.closed {
		return nil
	}
	return l
}

// lostToRouter is a reconnect of peer that the ROUTER ignored (a
// duplicate identity): its connect is lost there, which is the loss the
// stale route models, so the route is no longer stale.
func (e *Engine) lostToRouter(peer string) { e.consumeStale(peer) }

// send queues m to c's peer. Called on the stepping goroutine only.
func (e *Engine) send(c *conn, m wire.Message) {
	if c == nil || c.closed {
		return
	}
	p, err := wire.Encode(m)
	if err != nil {
		e.log.Error(compP2P, "encode %s for %s: %v", m.Type, c.l.peer, err)
		return
	}
	select {
	case c.l.out <- outFrame{b: p, at: e.now.Add(e.loopWork)}:
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
func (e *Engine) closeConn(c *conn) { e.endConn(c, false) }

// closeAfterFlush closes c once what is queued has been sent.
func (e *Engine) closeAfterFlush(c *conn) { e.endConn(c, true) }

func (e *Engine) endConn(c *conn, flush bool) {
	if c.closed {
		return
	}
	c.closed = true
	l := c.l
	if l.cons == c {
		l.cons = nil
	}
	if l.prod == c {
		l.prod = nil
	}
	if c.sess == nil {
		e.dropProducerState(c)
	}
	if l.cons == nil && l.prod == nil {
		e.closeLink(l, flush)
	}
}

// closeLink closes l's DEALER: at once, or after what is queued went out
// and a linger.
func (e *Engine) closeLink(l *link, flush bool) {
	if l.closed {
		return
	}
	l.closed = true
	if e.links[l.peer] == l {
		delete(e.links, l.peer)
	}
	if !flush {
		l.abort.Store(true)
	}
	close(l.out)
}

// connLost handles a link that died under a role: its DEALER disconnected
// (a reset, the peer's close, an expired heartbeat) or its queue filled.
func (e *Engine) connLost(c *conn, err error) {
	if c.closed {
		return
	}
	if c.sess != nil {
		s := c.sess
		if errors.Is(err, zmtp.ErrHeartbeat) {
			e.reapSilent(s, "heartbeat timed out after "+secs(e.cfg.HeartbeatTimeout))
			return
		}
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
	if c.peerID != "" {
		return c.peerID
	}
	return c.l.peer
}

// lostReason names why a connection ended in the words an operator expects.
func lostReason(err error) string {
	switch {
	case err == nil:
		return "connection closed"
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return "connection closed by peer"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, zmtp.ErrHeartbeat):
		return "heartbeat expired"
	}
	return err.Error()
}
