package relay

import (
	"bufio"
	"errors"
	"math"
	"net"
	"sync"
	"syscall"
	"time"

	"p2pfault/sim/wire"
	"p2pfault/zmtp"
)

// session is one relayed connection pair: the connection an engine made
// to the link, and the one the link made to the other engine, with a flow
// each way.
type session struct {
	l         *Link
	near, far net.Conn
	flows     [2]*flow // by Dir-1
	stop      chan struct{}
	once      sync.Once
}

func newSession(l *Link, near, far net.Conn, dir Dir) *session {
	s := &session{l: l, near: near, far: far, stop: make(chan struct{})}
	back := ToDecoder
	if dir == ToDecoder {
		back = ToSource
	}
	s.flows[dir-1] = newFlow(s, dir, near, far)
	s.flows[back-1] = newFlow(s, back, far, near)
	return s
}

func (s *session) flow(d Dir) *flow { return s.flows[d-1] }

// run relays until both flows have ended.
func (s *session) run() {
	var wg sync.WaitGroup
	for _, f := range s.flows {
		wg.Add(2)
		go func() { defer wg.Done(); f.read() }()
		go func() { defer wg.Done(); f.write() }()
	}
	wg.Wait()
}

// close ends both connections with a FIN, dropping what is queued.
func (s *session) close() {
	s.once.Do(func() { close(s.stop) })
	s.near.Close()
	s.far.Close()
}

// reset ends both connections with an RST each.
func (s *session) reset() {
	s.once.Do(func() { close(s.stop) })
	abort(s.near)
	abort(s.far)
}

// flow is one direction of a session: a reader that parses frames and
// queues their bytes with the time they are due, and a writer that sends
// them then.
type flow struct {
	s        *session
	dir      Dir
	src, dst net.Conn
	last     time.Time // reader's: when the previous bytes are due
	busy     time.Time // reader's: the bandwidth's horizon
	warned   bool      // reader's: an identity not the pair's was logged

	mu    sync.Mutex
	q     []item // by due time; equal times in the order queued
	ended bool   // the reader is done: the writer closes dst after q
	rst   bool   // the reader's side was reset: so is dst
	done  bool   // the writer is done
	wake  chan struct{}
	room  chan struct{}
}

type item struct {
	b  []byte
	at time.Time
}

func newFlow(s *session, dir Dir, src, dst net.Conn) *flow {
	return &flow{s: s, dir: dir, src: src, dst: dst, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (f *flow) read() {
	br := bufio.NewReaderSize(f.src, 64<<10)
	err := f.greeting(br)
	for err == nil {
		err = f.message(br)
	}
	f.mu.Lock()
	f.ended, f.rst = true, errors.Is(err, syscall.ECONNRESET)
	f.mu.Unlock()
	signal(f.wake)
}

// greeting relays the 64 bytes of the greeting as they arrive.
func (f *flow) greeting(br *bufio.Reader) error {
	buf := make([]byte, zmtp.GreetingLen)
	for left := len(buf); left > 0; {
		n, err := br.Read(buf[:left])
		if n > 0 {
			f.pass(append([]byte(nil), buf[:n]...))
			left -= n
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// message relays one command or one message: a single-part one is a
// control message, summarized, rewritten and put to the fault.
func (f *flow) message(br *bufio.Reader) error {
	fr, err := zmtp.ReadFrame(br, wire.MaxMessageLen+1)
	if err != nil {
		return err
	}
	if fr.Command {
		f.command(fr)
		return nil
	}
	if !fr.More {
		f.control(fr.Body)
		return nil
	}
	b := zmtp.AppendFrame(nil, fr)
	for fr.More {
		if fr, err = zmtp.ReadFrame(br, wire.MaxMessageLen+1); err != nil {
			return err
		}
		b = zmtp.AppendFrame(b, fr)
	}
	f.s.l.count(func(c *Counters) { c.Unparsed[f.dir]++ })
	f.pass(b)
	return nil
}

func (f *flow) command(fr zmtp.Frame) {
	l := f.s.l
	switch zmtp.CommandName(fr.Body) {
	case "READY":
		from, to := l.rewrite(f.dir)
		body, err := zmtp.RewriteReady(fr.Body, func(old []byte) []byte {
			if string(old) == from {
				return []byte(to)
			}
			if len(old) > 0 && !f.warned {
				f.warned = true
				l.cfg.Logf("relay %s: %s: identity %q is not %s: relayed as is (replies to it bypass the link)", l.cfg.Name, f.dir, old, from)
			}
			return old
		})
		if err == nil {
			fr.Body = body
		}
	case "PING", "PONG":
		l.count(func(c *Counters) { c.Heartbeats[f.dir]++ })
	}
	f.pass(zmtp.AppendFrame(nil, fr))
}

func (f *flow) control(body []byte) {
	l := f.s.l
	sum, err := wire.Peek(body)
	if err != nil {
		l.count(func(c *Counters) { c.Unparsed[f.dir]++ })
		f.pass(zmtp.AppendFrame(nil, zmtp.Frame{Body: body}))
		return
	}
	if from, to := l.rewrite(f.dir); sum.PeerID == from {
		body, _ = wire.RewritePeerID(body, from, to)
		sum.PeerID = to
	}
	a := l.decide(Message{Pair: l.cfg.Name, Dir: f.dir, Summary: sum})
	b := zmtp.AppendFrame(nil, zmtp.Frame{Body: body})
	// The sim's blocks ride on its transfer_done (bytes): under a
	// bandwidth they cost the link their size, as the data plane's
	// would on a link that carried it.
	n := len(b) + int(min(sum.Bytes, math.MaxInt32))
	switch a.Verb {
	case Pass:
		f.passAs(b, n)
	case Hold:
		l.hold(heldMsg{s: f.s, dir: f.dir, key: Key{f.dir, sum.Type}, b: b})
	case Delay:
		at, _ := l.due(f.dir, n, time.Time{}, time.Time{})
		f.enqueue(b, at.Add(a.Delay), true)
	}
}

// pass queues b behind what came before it, under the toxics.
func (f *flow) pass(b []byte) { f.passAs(b, len(b)) }

// passAs is pass for bytes that cost the bandwidth n.
func (f *flow) passAs(b []byte, n int) {
	f.last, f.busy = f.s.l.due(f.dir, n, f.last, f.busy)
	f.enqueue(b, f.last, true)
}

// enqueue puts b in the queue at its due time; with wait it waits for
// room. False once the writer is done.
func (f *flow) enqueue(b []byte, at time.Time, wait bool) bool {
	f.mu.Lock()
	for wait && len(f.q) >= queueMax && !f.done {
		f.mu.Unlock()
		select {
		case <-f.room:
		case <-f.s.stop:
			return false
		}
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	i := len(f.q)
	for i > 0 && f.q[i-1].at.After(at) {
		i--
	}
	f.q = append(f.q, item{})
	copy(f.q[i+1:], f.q[i:])
	f.q[i] = item{b: b, at: at}
	signal(f.wake)
	return true
}

// write sends what is due; once the reader has ended and the queue is
// empty it passes the close on (a reset as a reset, a FIN after the
// slow-close toxic) and ends the source side too.
func (f *flow) write() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b, wait, ended := f.next()
		if ended {
			break
		}
		if b != nil {
			if _, err := f.dst.Write(b); err != nil {
				f.finish()
				abort(f.src)
				return
			}
			continue
		}
		var tc <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			tc = timer.C
		}
		select {
		case <-f.wake:
		case <-tc:
		case <-f.s.stop:
			f.finish()
			return
		}
		timer.Stop()
	}
	f.mu.Lock()
	rst := f.rst
	f.mu.Unlock()
	if rst {
		f.finish()
		abort(f.dst)
		return
	}
	if d := f.s.l.slowClose(f.dir); d > 0 {
		f.s.l.count(func(c *Counters) { c.SlowClosed++ })
		select {
		case <-time.After(d):
		case <-f.s.stop:
		}
	}
	f.finish()
	f.dst.Close()
}

// next is the head of the queue if it is due, else how long until it is
// (0: nothing queued), and whether the flow is over.
func (f *flow) next() (b []byte, wait time.Duration, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.q) == 0 {
		return nil, 0, f.ended
	}
	if d := time.Until(f.q[0].at); d > 0 {
		return nil, d, false
	}
	b = f.q[0].b
	f.q[0] = item{}
	f.q = f.q[1:]
	signal(f.room)
	return b, 0, false
}

func (f *flow) finish() {
	f.mu.Lock()
	f.done, f.q = true, nil
	f.mu.Unlock()
	signal(f.room)
}
