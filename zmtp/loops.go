package zmtp

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// readLoop decodes frames until the connection closes. Any complete frame
// cancels both heartbeat deadlines (libzmq stream_engine_base.cpp
// decode_and_push); a PING then sets the TTL deadline and is answered.
func (c *Conn) readLoop() {
	defer c.started.Done()
	var first []byte // a message's first part, until a second one comes
	var parts [][]byte
	n, size := 0, 0
	for {
		f, err := readFrame(c.br, c.o.MaxMsgSize-size)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("peer closed the connection: %w", err)
			}
			c.fail(err)
			return
		}
		c.heard(f.command)
		if f.command {
			if err := c.onCommand(f.body); err != nil {
				c.fail(err)
				return
			}
			continue
		}
		switch n {
		case 0:
			first = f.body
		case 1:
			parts = append(parts, first, f.body)
		default:
			parts = append(parts, f.body)
		}
		n++
		size += len(f.body)
		if f.more {
			if n >= maxFrames {
				c.fail(protoErr("a message of more than %d parts", maxFrames))
				return
			}
			continue
		}
		m := msg{one: first, parts: parts}
		if n > 1 {
			m.one = nil
		}
		if !c.deliver(m) {
			return
		}
		first, parts, n, size = nil, nil, 0, 0
	}
}

// deliver hands a message on; a ROUTER's duplicate connection drops it.
func (c *Conn) deliver(m msg) bool {
	if c.discard.Load() {
		if c.dropped.Add(1) == 1 {
			c.o.Logf("zmtp: dropping messages from %s: identity %q is routed to another connection (libzmq ROUTER, ROUTER_HANDOVER off)", c.nc.RemoteAddr(), c.PeerIdentity())
		}
		return true
	}
	d := delivery{from: c, m: m}
	select { // the common case, without a blocking select's cost
	case c.in <- d:
		return true
	default:
	}
	select {
	case c.in <- d:
		return true
	case <-c.done:
		return false
	}
}

func (c *Conn) onCommand(body []byte) error {
	cmd, err := parseCommand(body)
	if err != nil {
		return err
	}
	switch cmd.name {
	case "PING":
		ttl, pctx, err := parsePing(cmd.data)
		if err != nil {
			return err
		}
		if ttl > 0 {
			c.mu.Lock()
			if c.ttlAt.IsZero() {
				c.ttlAt = time.Now().Add(ttl)
				c.armed.Store(true)
			}
			c.mu.Unlock()
			c.poke()
		}
		c.sendCtl(appendCommand(nil, "PONG", pctx))
	case "ERROR":
		return protoErr("peer sent ERROR: %q", errorReason(cmd.data))
	}
	// PONG is traffic, already counted; other commands (SUBSCRIBE, ...)
	// mean nothing to a DEALER or ROUTER and are ignored, as libzmq does.
	return nil
}

// heard cancels both heartbeat deadlines: something arrived. It runs on
// every frame, so it reads the clock only where LastHeard will ask (a
// DEALER's connection, whose data frames are rare in vLLM's layout, and
// commands: PONGs are what it waits for) and takes the lock only while a
// deadline is armed, which is once per heartbeat interval at most.
func (c *Conn) heard(command bool) {
	if command || c.typ == TypeDealer {
		c.heardAt.Store(time.Now().UnixNano())
	}
	if !c.armed.Load() {
		return
	}
	c.mu.Lock()
	c.timeoutAt, c.ttlAt = time.Time{}, time.Time{}
	c.armed.Store(false)
	c.mu.Unlock()
	c.poke()
}

func (c *Conn) poke() {
	select {
	case c.rearm <- struct{}{}:
	default:
	}
}

// sendCtl queues a PING or PONG; when two are already waiting behind a
// blocked write, this one would not get out either.
func (c *Conn) sendCtl(b []byte) {
	select {
	case c.ctl <- b:
	default:
	}
}

func (c *Conn) ctlLoop() {
	defer c.started.Done()
	for {
		select {
		case <-c.done:
			return
		case b := <-c.ctl:
			c.wmu.Lock()
			_, err := c.nc.Write(b)
			c.wmu.Unlock()
			if err != nil {
				c.fail(fmt.Errorf("write: %w", err))
				return
			}
		}
	}
}

// heartbeatLoop sends a PING every HeartbeatIvl, arming the timeout if it
// is not armed (libzmq zmtp_engine.cpp produce_ping_message), and closes
// the connection when the timeout or the peer's TTL passes with nothing
// heard.
func (c *Conn) heartbeatLoop() {
	defer c.started.Done()
	var tick <-chan time.Time
	if c.o.HeartbeatIvl > 0 {
		t := time.NewTicker(c.o.HeartbeatIvl)
		defer t.Stop()
		tick = t.C
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	ping := appendCommand(nil, "PING", pingData(c.o.HeartbeatTTL))
	for {
		due := c.deadline()
		var expiry <-chan time.Time
		if !due.IsZero() {
			timer.Reset(time.Until(due))
			expiry = timer.C
		}
		select {
		case <-c.done:
			return
		case <-c.rearm:
		case <-tick:
			c.o.Gate()
			c.sendCtl(ping)
			c.mu.Lock()
			if c.timeoutAt.IsZero() && c.o.HeartbeatTimeout > 0 {
				c.timeoutAt = time.Now().Add(c.o.HeartbeatTimeout)
				c.armed.Store(true)
			}
			c.mu.Unlock()
		case <-expiry:
			c.o.Gate()
			select {
			case <-c.done:
				return
			case <-time.After(inputFirst):
			}
			if err := c.expired(); err != nil {
				c.fail(err)
				return
			}
		}
		timer.Stop()
	}
}

func (c *Conn) deadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.timeoutAt.IsZero():
		return c.ttlAt
	case c.ttlAt.IsZero() || c.timeoutAt.Before(c.ttlAt):
		return c.timeoutAt
	}
	return c.ttlAt
}

// expired says which deadline has passed, if one still has.
func (c *Conn) expired() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	switch {
	case !c.timeoutAt.IsZero() && !now.Before(c.timeoutAt):
		return fmt.Errorf("%w: nothing received within %v after a PING", ErrHeartbeat, c.o.HeartbeatTimeout)
	case !c.ttlAt.IsZero() && !now.Before(c.ttlAt):
		return fmt.Errorf("%w: nothing received within the TTL of the peer's last PING", ErrHeartbeat)
	}
	return nil
}

// pump writes what a socket queued for this connection. A message taken
// from the queue when the connection dies is lost, as one in libzmq's
// encoder is.
func (c *Conn) pump(out *pipe) {
	defer c.started.Done()
	for {
		m, ok := out.pop(c.done)
		if !ok {
			return
		}
		if c.write(m) != nil {
			return
		}
	}
}

// pipe is a socket's queue of messages to send (libzmq's pipe), bounded
// by a high-water mark.
type pipe struct {
	mu    sync.Mutex
	q     []msg
	head  int // q[head:] are queued: the slice is reused, not reallocated per message
	hwm   int
	ready chan struct{} // has a token while q is not empty
}

func newPipe(hwm int) *pipe { return &pipe{hwm: hwm, ready: make(chan struct{}, 1)} }

func (p *pipe) push(m msg) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.q)-p.head >= p.hwm {
		return ErrFull
	}
	p.q = append(p.q, m)
	select {
	case p.ready <- struct{}{}:
	default:
	}
	return nil
}

// pop takes the oldest message, waiting for one until done is closed.
func (p *pipe) pop(done <-chan struct{}) (msg, bool) {
	for {
		p.mu.Lock()
		if p.head < len(p.q) {
			m := p.q[p.head]
			p.q[p.head] = msg{}
			p.head++
			if p.head == len(p.q) {
				p.q, p.head = p.q[:0], 0
			} else if p.head > len(p.q)/2 {
				p.q = p.q[:copy(p.q, p.q[p.head:])]
				p.head = 0
			}
			if p.head < len(p.q) {
				select {
				case p.ready <- struct{}{}:
				default:
				}
			}
			p.mu.Unlock()
			return m, true
		}
		p.mu.Unlock()
		select {
		case <-p.ready:
		case <-done:
			return msg{}, false
		}
	}
}
