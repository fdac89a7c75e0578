package zmtp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/memnet"
)

// vllmHB is control/zmq.py's heartbeat: IVL 2 s, TIMEOUT 10 s, TTL 10 s.
var vllmHB = Options{HeartbeatIvl: 2 * time.Second, HeartbeatTimeout: 10 * time.Second, HeartbeatTTL: 10 * time.Second}

// logs collects Logf lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// snapshot is the lines so far, read under the lock (a failure message
// may be made while a socket's goroutine still logs).
func (l *logs) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *logs) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// world is two processes on an in-memory network: a ROUTER's and a
// DEALER's.
type world struct {
	f        *memnet.Fabric
	srv, cli *memnet.Host
}

func newWorld() world {
	f := memnet.New(1)
	return world{f: f, srv: f.Host("srv"), cli: f.Host("cli")}
}

func (w world) router(t *testing.T, o Options) *Router {
	t.Helper()
	ln, err := w.srv.Listen("tcp", "127.0.0.1:7777")
	if err != nil {
		t.Fatal(err)
	}
	o.Gate = w.srv.Wait
	r := NewRouter(ln, o)
	t.Cleanup(func() { r.Close() })
	return r
}

func (w world) dealer(t *testing.T, id string, o Options) *Dealer {
	t.Helper()
	o.Identity, o.Net, o.Gate = []byte(id), w.cli, w.cli.Wait
	d := NewDealer(o)
	t.Cleanup(func() { d.Close() })
	return d
}

func recvWithin(t *testing.T, r *Router, d time.Duration) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	id, p, err := r.Recv(ctx)
	if err != nil {
		t.Fatalf("ROUTER recv: %v", err)
	}
	return string(id), string(p)
}

// nextEvent returns the next event of kind k, skipping others.
func nextEvent(t *testing.T, d *Dealer, k EventKind, within time.Duration) Event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-d.Events():
			if !ok {
				t.Fatalf("events closed before a %s", k)
			}
			if ev.Kind == k {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within %v", k, within)
		}
	}
}

// TestRoundTripWithIdentities: a message queued before Connect reaches the
// ROUTER with the DEALER's identity, the reply routed by it comes back, and
// an unknown identity is an error, not a silent drop.
func TestRoundTripWithIdentities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		r := w.router(t, vllmHB)
		d := w.dealer(t, "10.0.0.1:7001", vllmHB)
		if err := d.Send([]byte("connect")); err != nil {
			t.Fatal(err)
		}
		if err := d.Connect("127.0.0.1:7777"); err != nil {
			t.Fatal(err)
		}
		id, p := recvWithin(t, r, time.Second)
		if id != "10.0.0.1:7001" || p != "connect" {
			t.Fatalf("ROUTER got [%q %q], want [10.0.0.1:7001 connect]", id, p)
		}
		if err := r.Send([]byte(id), []byte("connect_ack")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got, err := d.Recv(ctx)
		if err != nil || string(got) != "connect_ack" {
			t.Fatalf("DEALER got %q, %v; want connect_ack", got, err)
		}
		if err := r.Send([]byte("nobody:1"), []byte("x")); !errors.Is(err, ErrUnroutable) {
			t.Fatalf("send to an unknown identity: %v, want ErrUnroutable", err)
		}
	})
}

// TestQueueBeforeConnectAndReconnect: a DEALER whose peer is not there
// yet retries every ReconnectIvl and delivers what was queued, in order,
// within one interval of the listener appearing.
func TestQueueBeforeConnectAndReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		d := w.dealer(t, "cli:1", Options{})
		if err := d.Connect("127.0.0.1:7777"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for i := range 3 {
			d.Send(fmt.Appendf(nil, "m%d", i))
		}
		first := nextEvent(t, d, ConnectRetried, time.Second)
		second := nextEvent(t, d, ConnectRetried, time.Second)
		if got := second.At.Sub(first.At); got != DefaultReconnectIvl {
			t.Fatalf("retries %v apart, want %v", got, DefaultReconnectIvl)
		}
		time.Sleep(time.Second)
		r := w.router(t, Options{})
		up := time.Now()
		for i := range 3 {
			_, p := recvWithin(t, r, time.Second)
			if p != fmt.Sprintf("m%d", i) {
				t.Fatalf("message %d is %q", i, p)
			}
		}
		if lag := time.Since(up); lag > DefaultReconnectIvl {
			t.Fatalf("queued messages arrived %v after the listener (want <= %v; dialling since %v)", lag, DefaultReconnectIvl, up.Sub(start))
		}
	})
}

// TestHeartbeatTimeoutWhenPeerStops: the ROUTER's process stops (SIGSTOP)
// 5 s after the handshake; the DEALER's PING at 6 s goes unanswered and
// it disconnects 10 s later (libzmq: timeout armed at the PING, fired
// with nothing heard), then reconnects. The ROUTER sends no TTL here, so
// only the timeout counts.
func TestHeartbeatTimeoutWhenPeerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		srvHB := vllmHB
		srvHB.HeartbeatTTL = 0
		w.router(t, srvHB)
		d := w.dealer(t, "cli:1", vllmHB)
		d.Connect("127.0.0.1:7777")
		up := nextEvent(t, d, HandshakeSucceeded, time.Second).At
		time.Sleep(5 * time.Second)
		w.srv.Freeze()
		defer w.srv.Thaw()
		ev := nextEvent(t, d, Disconnected, time.Minute)
		if got, want := ev.At.Sub(up), 16*time.Second+inputFirst; got != want {
			t.Fatalf("disconnected %v after the handshake, want %v (PING at 6 s + timeout 10 s)", got, want)
		}
		if !errors.Is(ev.Err, ErrHeartbeat) {
			t.Fatalf("disconnect reason %v, want a heartbeat", ev.Err)
		}
		// The redial lands in the stopped process's backlog: TCP connects,
		// the handshake waits.
		nextEvent(t, d, Connected, time.Second)
		synctest.Wait()
		select {
		case ev := <-d.Events():
			t.Fatalf("event %s while the peer is stopped", ev.Kind)
		default:
		}
	})
}

// TestPeerTTLHonoured: a DEALER that sends no PINGs of its own closes when
// the ROUTER's last PING's TTL (5 s) passes with nothing after it; with
// no TTL it never does.
func TestPeerTTLHonoured(t *testing.T) {
	for _, ttl := range []time.Duration{5 * time.Second, 0} {
		t.Run(fmt.Sprint("ttl=", ttl), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWorld()
				w.router(t, Options{HeartbeatIvl: 2 * time.Second, HeartbeatTTL: ttl})
				d := w.dealer(t, "cli:1", Options{})
				d.Connect("127.0.0.1:7777")
				up := nextEvent(t, d, HandshakeSucceeded, time.Second).At
				time.Sleep(5 * time.Second)
				w.srv.Freeze()
				defer w.srv.Thaw()
				if ttl == 0 {
					time.Sleep(time.Minute)
					synctest.Wait()
					if len(d.Events()) != 0 {
						t.Fatalf("event %s without a TTL", (<-d.Events()).Kind)
					}
					return
				}
				ev := nextEvent(t, d, Disconnected, time.Minute)
				if got, want := ev.At.Sub(up), 4*time.Second+ttl+inputFirst; got != want {
					t.Fatalf("disconnected %v after the handshake, want %v (last PING at 4 s + TTL)", got, want)
				}
			})
		})
	}
}

// TestStoppedPeerResumes replays a libzmq stall on the fake clock: the
// ROUTER's process stops for 30 s; the DEALER disconnects on its
// heartbeat, redials into the backlog, and what it queued meanwhile is
// delivered once the ROUTER resumes (libzmq measured: connect_ack 0.13 s
// after SIGCONT).
func TestStoppedPeerResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		r := w.router(t, vllmHB)
		d := w.dealer(t, "cli:1", vllmHB)
		d.Connect("127.0.0.1:7777")
		nextEvent(t, d, HandshakeSucceeded, time.Second)
		time.Sleep(3 * time.Second)
		w.srv.Freeze()
		stopped := time.Now()
		ev := nextEvent(t, d, Disconnected, time.Minute)
		if dt := ev.At.Sub(stopped); dt < 8*time.Second || dt > 12*time.Second+inputFirst {
			t.Fatalf("disconnect %v after the stop; libzmq's window is 8-12 s", dt)
		}
		d.Send([]byte("connect"))
		time.Sleep(stopped.Add(30 * time.Second).Sub(time.Now()))
		w.srv.Thaw()
		resumed := time.Now()
		id, p := recvWithin(t, r, time.Second)
		if id != "cli:1" || p != "connect" {
			t.Fatalf("got [%q %q] after resume", id, p)
		}
		if lag := time.Since(resumed); lag > time.Second {
			t.Fatalf("queued message arrived %v after resume", lag)
		}
	})
}

// TestResumedProcessReadsBeforeItsTimersFire: a ROUTER stopped past the
// TTL of the DEALER's last PING (3 s) but resumed before the DEALER's own
// timeout keeps its connection: on resume it reads the PINGs that waited
// in its buffer before its expired TTL counts, as libzmq's I/O loop
// handles ready input before expired timers.
func TestResumedProcessReadsBeforeItsTimersFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		var l logs
		r := w.router(t, Options{Logf: l.logf}) // no PINGs of its own: only the DEALER's arrive
		d := w.dealer(t, "cli:1", Options{HeartbeatIvl: 2 * time.Second, HeartbeatTimeout: 10 * time.Second, HeartbeatTTL: 3 * time.Second})
		d.Connect("127.0.0.1:7777")
		nextEvent(t, d, HandshakeSucceeded, time.Second)
		time.Sleep(5 * time.Second) // the last PING, at 4 s, sets the ROUTER's TTL to 7 s
		w.srv.Freeze()
		time.Sleep(6 * time.Second)
		w.srv.Thaw()
		d.Send([]byte("after"))
		if _, p := recvWithin(t, r, time.Second); p != "after" {
			t.Fatalf("got %q", p)
		}
		synctest.Wait()
		if len(d.Events()) != 0 || l.has("closed") {
			t.Fatalf("the connection dropped across the stop: event %v, logs %q", len(d.Events()), l.snapshot())
		}
	})
}

// TestDuplicateIdentityIgnored: libzmq's ROUTER (ROUTER_HANDOVER off)
// keeps a second connection with an identity it already routes but never
// routes it: its messages vanish, even after the first one has gone; a
// connection made after the first has gone is routed. Measured on libzmq
// 4.3.4 (python3-zmq): a1 delivered, b1 not, a reply to X reached a, b2
// (after a closed) not, c1 (new) delivered.
func TestDuplicateIdentityIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		var l logs
		r := w.router(t, Options{Logf: l.logf})
		a := w.dealer(t, "X", Options{})
		a.Connect("127.0.0.1:7777")
		a.Send([]byte("a1"))
		if _, p := recvWithin(t, r, time.Second); p != "a1" {
			t.Fatalf("got %q, want a1", p)
		}
		b := w.dealer(t, "X", Options{})
		b.Connect("127.0.0.1:7777")
		nextEvent(t, b, HandshakeSucceeded, time.Second)
		time.Sleep(10 * time.Millisecond) // past the ROUTER's second look
		b.Send([]byte("b1"))
		r.Send([]byte("X"), []byte("to-X"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if got, err := a.Recv(ctx); string(got) != "to-X" {
			t.Fatalf("first connection got %q, %v; want to-X", got, err)
		}
		a.Close()
		synctest.Wait()
		b.Send([]byte("b2"))
		c := w.dealer(t, "X", Options{})
		c.Connect("127.0.0.1:7777")
		c.Send([]byte("c1"))
		if _, p := recvWithin(t, r, time.Second); p != "c1" {
			t.Fatalf("got %q, want c1 (b1 and b2 dropped)", p)
		}
		if !l.has(`identity "X", already routed`) {
			t.Fatalf("no log line for the duplicate: %q", l.snapshot())
		}
	})
}

// TestGarbageClosesOnlyThatConnection: bytes that are not ZMTP close the
// connection that sent them, with a logged reason; the ROUTER goes on.
func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		var l logs
		r := w.router(t, Options{Logf: l.logf})
		nc, err := w.cli.DialContext(context.Background(), "tcp", "127.0.0.1:7777")
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		buf := make([]byte, 128)
		for {
			if _, err := nc.Read(buf); err != nil {
				break
			}
		}
		// The router logs its reason after it closes the connection:
		// wait for it to be done, not for the close alone.
		synctest.Wait()
		if !l.has("not ZMTP 3's") {
			t.Fatalf("no reason logged: %q", l.snapshot())
		}
		d := w.dealer(t, "ok", Options{})
		d.Connect("127.0.0.1:7777")
		d.Send([]byte("still here"))
		if _, p := recvWithin(t, r, time.Second); p != "still here" {
			t.Fatalf("got %q", p)
		}
	})
}

// TestHandshakeTimeout: a peer that accepts but never answers (a stopped
// process's backlog) is given up after HandshakeIvl with Disconnected,
// and the DEALER redials.
func TestHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		ln, err := w.srv.Listen("tcp", "127.0.0.1:7777")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		w.srv.Freeze()
		defer w.srv.Thaw()
		d := w.dealer(t, "cli:1", Options{HandshakeIvl: 3 * time.Second})
		d.Connect("127.0.0.1:7777")
		at := nextEvent(t, d, Connected, time.Second).At
		ev := nextEvent(t, d, Disconnected, time.Minute)
		if got := ev.At.Sub(at); got != 3*time.Second {
			t.Fatalf("handshake given up after %v, want 3s", got)
		}
		nextEvent(t, d, Connected, time.Second)
	})
}

// TestCloseIsIdempotentAndEndsEverything: Close twice on each socket and
// a connection; the bubble ending checks no goroutine is left.
func TestCloseIsIdempotentAndEndsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		r := w.router(t, vllmHB)
		d := w.dealer(t, "cli:1", vllmHB)
		d.Connect("127.0.0.1:7777")
		d.Send([]byte("x"))
		recvWithin(t, r, time.Second)
		d.Close()
		d.Close()
		r.Close()
		r.Close()
		if err := d.Send([]byte("y")); !errors.Is(err, ErrClosed) {
			t.Fatalf("send after close: %v", err)
		}
		a, b := w.cli.Pipe()
		done := make(chan *Conn, 1)
		go func() { c, _ := NewConn(b, TypeRouter, Options{}); done <- c }()
		ca, err := NewConn(a, TypeDealer, Options{Identity: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		cb := <-done
		if !bytes.Equal(cb.PeerIdentity(), []byte("p")) || cb.PeerType() != TypeDealer {
			t.Fatalf("peer %q %s", cb.PeerIdentity(), cb.PeerType())
		}
		ca.Close()
		ca.Close()
		cb.Close()
	})
}

// TestMultipartMessages: parts arrive together and in order on RecvMsg;
// Recv drops a message of several parts (as vLLM's _recv_router does)
// and returns the next single one; a message of no parts is refused.
func TestMultipartMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		var l logs
		r := w.router(t, Options{Logf: l.logf})
		d := w.dealer(t, "cli:1", Options{})
		d.Connect("127.0.0.1:7777")
		if err := d.SendMsg(nil); err == nil {
			t.Fatal("a message of no parts was queued")
		}
		d.SendMsg([][]byte{[]byte("a"), {}, []byte("c")})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		id, parts, err := r.RecvMsg(ctx)
		if err != nil || string(id) != "cli:1" || len(parts) != 3 || string(parts[0]) != "a" || len(parts[1]) != 0 || string(parts[2]) != "c" {
			t.Fatalf("RecvMsg: %q %q %v", id, parts, err)
		}
		d.SendMsg([][]byte{[]byte("x"), []byte("y")})
		d.Send([]byte("single"))
		if _, p := recvWithin(t, r, time.Second); p != "single" {
			t.Fatalf("Recv returned %q, want the single-part message", p)
		}
		if !l.has("dropping a message of 2 parts") {
			t.Fatalf("no log line for the dropped message: %q", l.snapshot())
		}
	})
}
