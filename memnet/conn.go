package memnet

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

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
	abort        bool // SetLinger(0): Close resets instead of a FIN
	rdl, wdl     time.Time
	rd, wr       signal // its readers and its writers wait on these
}

// wakeAll wakes whoever waits on either end of c's connection: c's state
// changed for both (it closed, or its process died); f.mu is held.
func (c *conn) wakeAll() {
	for _, e := range []*conn{c, c.peer} {
		e.rd.wake()
		e.wr.wake()
	}
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

// drop closes c without a FIN (its process died); f.mu is held. Its
// waiters and its peer's are woken: the caller pushes a FIN or sets a
// reset before it releases f.mu, and the peer's next check sees it.
func (c *conn) drop() {
	c.closed = true
	delete(c.f.conns, c)
	delete(c.host.ends, c)
	c.wakeAll()
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
			f.wait(&c.rd, c.host, time.Time{}, nil)
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
			c.peer.wr.wake() // room for the writer
			c.rd.wake()      // another reader of c may read what is left
			return n, nil
		}
		if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		var next time.Time
		if s.arrived < len(s.segs) && !f.cut(s.src(), s.dst()) {
			next = s.segs[s.arrived].at
		}
		f.wait(&c.rd, c.host, until(c.rdl, next), nil)
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
			f.wait(&c.wr, c.host, time.Time{}, nil)
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
			c.peer.rd.wake()
			continue
		}
		f.wait(&c.wr, c.host, c.wdl, nil)
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
	c.drop() // wakes both ends: the FIN, and room for the peer's writer
	if c.abort {
		c.out.rst = true
	} else {
		f.push(c.out, nil, true)
	}
	c.in.segs, c.in.arrived, c.in.off, c.in.buffered = nil, 0, 0, 0
	return nil
}

// SetLinger is TCP's SO_LINGER as far as Close goes: with sec 0 a Close
// resets the connection (the peer's reads and writes fail with
// ECONNRESET) instead of sending a FIN; any other value keeps the FIN.
func (c *conn) SetLinger(sec int) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.abort = sec == 0
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
	c.rd.wake()
	c.wr.wake()
	return nil
}
