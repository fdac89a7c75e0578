package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// connected listens on srv and returns a connection dialled from cli and
// its accepted end.
func connected(t *testing.T, cli, srv *Host) (net.Conn, net.Conn) {
	t.Helper()
	ln, _ := listen(t, srv)
	return dialAccept(t, cli, ln)
}

// async runs fn and reports its result (and when it came) on the channel.
type result struct {
	n   int
	err error
	at  time.Time
}

func async(fn func() (int, error)) <-chan result {
	ch := make(chan result, 1)
	go func() { n, err := fn(); ch <- result{n, err, time.Now()} }()
	return ch
}

// pending fails when ch already has a result: the call must still block.
func pending(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (%d, %v); want it blocked", what, r.n, r.err)
	default:
	}
}

func TestListenDialRefuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		a, b := f.Host("a"), f.Host("b")
		ln, err := b.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if port < ephemeralLo || port > ephemeralHi {
			t.Fatalf("port 0 gave %d, want an ephemeral port", port)
		}
		if _, err := a.Listen("tcp", ln.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("listen on a bound address: %v, want EADDRINUSE", err)
		}
		ln2, err := b.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if p2 := ln2.Addr().(*net.TCPAddr).Port; p2 == port {
			t.Fatalf("port 0 handed out %d twice", p2)
		}

		c, err := a.DialContext(context.Background(), "tcp", "localhost:"+itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		n, err := s.Read(buf)
		if err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("read %q, %v; want ping", buf[:n], err)
		}
		if s.RemoteAddr().String() != c.LocalAddr().String() {
			t.Fatalf("accepted end's remote %s, dialer's local %s", s.RemoteAddr(), c.LocalAddr())
		}
		c.Close()
		if _, err := s.Read(buf); err != io.EOF {
			t.Fatalf("read after the peer's close: %v, want EOF", err)
		}

		t0 := time.Now()
		ln2.Close()
		_, err = a.DialContext(context.Background(), "tcp", ln2.Addr().String())
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial to a closed port: %v, want ECONNREFUSED", err)
		}
		if d := time.Since(t0); d != 0 {
			t.Fatalf("refusal took %s, want at once", d)
		}
		if _, err := ln2.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept on a closed listener: %v, want net.ErrClosed", err)
		}
		if _, err := a.Listen("tcp", ln2.Addr().String()); err != nil {
			t.Fatalf("listen again on a freed address: %v", err)
		}
	})
}

func itoa(p int) string { return (&net.TCPAddr{Port: p}).String()[1:] }

func TestFreezeBacklogBufferAndBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		cli, srv := f.Host("cli"), f.Host("srv")
		ln, err := srv.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv.Freeze()
		t0 := time.Now()
		var s net.Conn
		accepted := async(func() (n int, err error) { s, err = ln.Accept(); return 0, err })
		// The kernel completes the connect of a stopped process.
		c, err := cli.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("connect to a frozen host: %v, want it to land in the backlog", err)
		}
		pending(t, accepted, "accept on a frozen host")

		// Writes fill the socket buffer, then block.
		big := bytes.Repeat([]byte("x"), SocketBuffer+1000)
		wrote := async(func() (int, error) { return c.Write(big) })
		pending(t, wrote, "a write beyond the frozen peer's socket buffer")

		time.Sleep(30 * time.Second)
		srv.Thaw()
		r := <-accepted
		if r.err != nil {
			t.Fatal(r.err)
		}
		if d := r.at.Sub(t0); d != 30*time.Second {
			t.Fatalf("accept returned after %s, want at the thaw (30s)", d)
		}
		go io.Copy(io.Discard, s)
		if r := <-wrote; r.err != nil || r.n != len(big) {
			t.Fatalf("the blocked write after the thaw: %d, %v", r.n, r.err)
		}
		c.Close()
	})
}

func TestFrozenHostsOwnCallsBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		cli, srv := f.Host("cli"), f.Host("srv")
		c, s := connected(t, cli, srv)
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		srv.Freeze()
		t0 := time.Now()
		buf := make([]byte, 16)
		read := async(func() (int, error) { return s.Read(buf) })
		pending(t, read, "a frozen host's read with data waiting")
		wrote := async(func() (int, error) { return s.Write([]byte("back")) })
		pending(t, wrote, "a frozen host's write")
		waited := async(func() (int, error) { srv.Wait(); return 0, nil })
		pending(t, waited, "Wait on a frozen host")
		time.Sleep(7 * time.Second)
		srv.Thaw()
		for _, ch := range []<-chan result{read, wrote, waited} {
			r := <-ch
			if r.err != nil {
				t.Fatal(r.err)
			}
			if d := r.at.Sub(t0); d != 7*time.Second {
				t.Fatalf("returned after %s, want at the thaw (7s)", d)
			}
		}
		if got := string(buf[:5]); got != "hello" {
			t.Fatalf("read %q after thaw, want hello", got)
		}
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "back" {
			t.Fatalf("peer read %q, %v; want back", buf[:n], err)
		}
	})
}

func TestBufferThenBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		cli, srv := f.Host("cli"), f.Host("srv")
		c, s := connected(t, cli, srv)
		srv.Freeze()
		n, err := c.Write(bytes.Repeat([]byte("y"), SocketBuffer))
		if err != nil || n != SocketBuffer {
			t.Fatalf("a full socket buffer's write: %d, %v", n, err)
		}
		wrote := async(func() (int, error) { return c.Write([]byte("z")) })
		pending(t, wrote, "a write into a full socket buffer")
		srv.Thaw()
		got := 0
		buf := make([]byte, 64<<10)
		for got < SocketBuffer+1 {
			n, err := s.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if r := <-wrote; r.err != nil || r.n != 1 {
			t.Fatalf("blocked write: %d, %v", r.n, r.err)
		}
	})
}

func TestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		c, s := connected(t, f.Host("cli"), f.Host("srv"))
		t0 := time.Now()
		s.SetReadDeadline(t0.Add(5 * time.Second))
		_, err := s.Read(make([]byte, 1))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past its deadline: %v, want a timeout", err)
		}
		if d := time.Since(t0); d != 5*time.Second {
			t.Fatalf("read deadline fired after %s, want 5s", d)
		}
		// A deadline moved into the past aborts a blocked read (net/http).
		s.SetReadDeadline(time.Time{})
		read := async(func() (int, error) { return s.Read(make([]byte, 1)) })
		pending(t, read, "a read with no deadline")
		s.SetReadDeadline(time.Unix(1, 0))
		if r := <-read; !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after its deadline moved to the past: %v", r.err)
		}
		// Writes time out once the buffer is full.
		s.(*conn).host.Freeze()
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		t1 := time.Now()
		n, err := c.Write(bytes.Repeat([]byte("w"), SocketBuffer+1))
		if !errors.Is(err, os.ErrDeadlineExceeded) || n != SocketBuffer {
			t.Fatalf("write into a full buffer: %d, %v; want %d and a timeout", n, err, SocketBuffer)
		}
		if d := time.Since(t1); d != 2*time.Second {
			t.Fatalf("write deadline fired after %s, want 2s", d)
		}
		s.(*conn).host.Thaw()
	})
}

func TestCrashResetsAndRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		cli, srv := f.Host("cli"), f.Host("srv")
		ln, err := srv.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		c, err := cli.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := ln.Accept()
		// A connection whose dead side holds unread bytes resets.
		c3, err := cli.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ln.Accept()
		if _, err := c3.Write([]byte("unread")); err != nil {
			t.Fatal(err)
		}
		c2, err := cli.DialContext(context.Background(), "tcp", addr) // left in the backlog
		if err != nil {
			t.Fatal(err)
		}
		read := async(func() (int, error) { return c.Read(make([]byte, 1)) })
		pending(t, read, "a read before the crash")
		srv.Freeze() // SIGKILL works on a stopped process too
		srv.Crash()
		if r := <-read; r.err != io.EOF {
			t.Fatalf("peer's read at the crash: %v, want EOF (the kernel's FIN)", r.err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("peer's write after the FIN of a dead process: %v, want EPIPE", err)
		}
		if _, err := c3.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read of a connection whose dead side had unread bytes: %v, want ECONNRESET", err)
		}
		if _, err := c3.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("write to it: %v, want ECONNRESET", err)
		}
		if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a connect left in the backlog: %v, want ECONNRESET", err)
		}
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the crashed host's own end: %v, want net.ErrClosed", err)
		}
		if _, err := cli.DialContext(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial after the crash: %v, want ECONNREFUSED", err)
		}
		if srv.Frozen() {
			t.Fatal("a crashed host is still frozen")
		}
		ln2, err := srv.Listen("tcp", addr) // the restart binds the same port
		if err != nil {
			t.Fatalf("restart on the same address: %v", err)
		}
		ln2.Close()
	})
}

func TestPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		a, b, other := f.Host("a"), f.Host("b"), f.Host("other")
		c, s := connected(t, a, b)
		if _, err := c.Write([]byte("before")); err != nil {
			t.Fatal(err)
		}
		f.Partition(a, b)
		// What arrived before the cut is readable; nothing after it is.
		buf := make([]byte, 16)
		if n, err := s.Read(buf); err != nil || string(buf[:n]) != "before" {
			t.Fatalf("read of what arrived before the cut: %q, %v", buf[:n], err)
		}
		if n, err := c.Write([]byte("during")); err != nil || n != 6 {
			t.Fatalf("write into a partition: %d, %v; want it buffered", n, err)
		}
		read := async(func() (int, error) { return s.Read(buf) })
		pending(t, read, "a read across a partition")
		big := async(func() (int, error) { return c.Write(make([]byte, SocketBuffer)) })
		pending(t, big, "a write beyond the buffer across a partition")

		// Connects vanish until the dialer's own deadline; a third host is
		// unaffected.
		ln, err := b.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = a.DialContext(ctx, "tcp", ln.Addr().String())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 3*time.Second {
			t.Fatalf("dial across a partition: %v after %s, want the ctx's deadline at 3s", err, time.Since(t0))
		}
		if oc, err := other.DialContext(context.Background(), "tcp", ln.Addr().String()); err != nil {
			t.Fatalf("a host outside the partition: %v", err)
		} else {
			oc.Close()
		}
		// A crash behind the partition is not seen until the heal.
		time.Sleep(10 * time.Second)
		f.Heal(a, b)
		if r := <-read; r.err != nil || string(buf[:r.n]) != "during" {
			t.Fatalf("read after the heal: %q, %v", buf[:r.n], r.err)
		}
		// "during" was sent at t0: its retransmissions go 0.2, 0.6, 1.4,
		// 3, 6.2, 12.6, 25.4 s after; the first after the heal gets in.
		if d := time.Since(t0); d != 25400*time.Millisecond {
			t.Fatalf("heal delivered after %s, want at the first retransmission after it (25.4s)", d)
		}
		go io.Copy(io.Discard, s)
		if r := <-big; r.err != nil || r.n != SocketBuffer {
			t.Fatalf("blocked write after the heal: %d, %v", r.n, r.err)
		}

		// A host cut from everyone: even a port nobody ever bound hangs.
		f.Partition(a, nil)
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := a.DialContext(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial from an isolated host: %v, want the ctx's deadline", err)
		}
		f.Heal(a, nil)
		c.Close()
	})
}

func TestCrashBehindPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		a, b := f.Host("a"), f.Host("b")
		c, _ := connected(t, a, b)
		f.Partition(a, b)
		b.Crash()
		read := async(func() (int, error) { return c.Read(make([]byte, 1)) })
		pending(t, read, "a read whose peer died behind a partition")
		f.Heal(a, b)
		if r := <-read; r.err != io.EOF {
			t.Fatalf("read after the heal: %v, want EOF (the dead process's FIN)", r.err)
		}
	})
}

func TestLossDelaysInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(7)
		a, b := f.Host("a"), f.Host("b")
		c, s := connected(t, a, b)
		f.Loss(a, b, 0.25)
		const n = 400
		sent := make([]time.Time, n)
		got := make(chan time.Time, n)
		go func() {
			buf := make([]byte, 1)
			for range n {
				if _, err := s.Read(buf); err != nil {
					return
				}
				got <- time.Now()
			}
		}()
		delayed := 0
		for i := range n {
			sent[i] = time.Now()
			if _, err := c.Write([]byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // far apart: each segment's own delay shows
		}
		var prev time.Time
		for i := range n {
			at := <-got
			d := at.Sub(sent[i])
			if at.Before(prev) {
				t.Fatalf("segment %d arrived before %d", i, i-1)
			}
			prev = at
			if d > 0 {
				delayed++
				// A lost segment arrives after RTOMin, 3×, 7×... (backoff).
				if d%RTOMin != 0 {
					t.Fatalf("segment %d delayed %s: not a sum of doubling RTOs", i, d)
				}
			}
		}
		if frac := float64(delayed) / n; frac < 0.18 || frac > 0.32 {
			t.Fatalf("%d of %d segments delayed (%.2f), want about 0.25", delayed, n, frac)
		}
		// A lost SYN costs SYNTimeout.
		f.Loss(a, b, 1)
		ln, _ := b.Listen("tcp", "127.0.0.1:0")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t0 := time.Now()
		if _, err := a.DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial with every SYN lost: %v", err)
		}
		if time.Since(t0) != 10*time.Second {
			t.Fatalf("dial gave up after %s, want at the ctx's deadline", time.Since(t0))
		}
		f.Loss(a, b, 0)
		c.Close()
	})
}

func TestPipeFreezesAndDiesWithHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		h := f.Host("engine")
		x, y := h.Pipe()
		if _, err := x.Write([]byte("m")); err != nil {
			t.Fatal(err)
		}
		h.Freeze()
		read := async(func() (int, error) { return y.Read(make([]byte, 1)) })
		pending(t, read, "a frozen host's pipe read")
		h.Thaw()
		if r := <-read; r.err != nil || r.n != 1 {
			t.Fatalf("pipe read after thaw: %d, %v", r.n, r.err)
		}
		read = async(func() (int, error) { return y.Read(make([]byte, 1)) })
		pending(t, read, "an empty pipe's read")
		h.Crash()
		if r := <-read; !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("pipe read at the crash: %v, want net.ErrClosed", r.err)
		}
	})
}

// TestPipeToBetweenTwoHosts: a pipe between a front end's host and its
// core's: the frozen core's end takes no step while the front end's goes
// on (its write buffers), no partition or loss of either host touches it,
// and a crash of one host ends its end as its death would: the other reads
// EOF after what was sent.
func TestPipeToBetweenTwoHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		fe, core := f.Host("front end"), f.Host("core")
		x, y := fe.PipeTo(core)
		core.Freeze()
		if _, err := x.Write([]byte("ab")); err != nil {
			t.Fatalf("the running end's write while the other host is frozen: %v", err)
		}
		read := async(func() (int, error) { return y.Read(make([]byte, 1)) })
		pending(t, read, "the frozen host's end's read")
		f.Partition(fe, nil)
		f.Partition(core, nil)
		f.Loss(fe, nil, 1)
		start := time.Now()
		core.Thaw()
		if r := <-read; r.err != nil || r.n != 1 || r.at != start {
			t.Fatalf("read at the thaw, under a partition and 100%% loss of both hosts: %d, %v at +%v; want 1 byte at once", r.n, r.err, r.at.Sub(start))
		}
		if n, err := y.Read(make([]byte, 1)); n != 1 || err != nil {
			t.Fatalf("the second byte: %d, %v", n, err)
		}
		if _, err := y.Write([]byte("c")); err != nil {
			t.Fatal(err)
		}
		if n, err := x.Read(make([]byte, 1)); n != 1 || err != nil {
			t.Fatalf("the front end's read: %d, %v", n, err)
		}
		core.Crash()
		if _, err := y.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the crashed host's own end: %v, want net.ErrClosed", err)
		}
		if _, err := x.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("the front end's read after the core's crash: %v, want EOF", err)
		}
		fe.Crash()
	})
}

func TestConnectAcrossAPartitionGoesWithTheNextSYN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		a, b := f.Host("a"), f.Host("b")
		ln, err := b.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f.Partition(a, b)
		time.AfterFunc(5*time.Second, func() { f.Heal(a, b) })
		t0 := time.Now()
		c, err := a.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		// SYNs at 0, 1, 3, 7 s: the first after the heal at 5 s connects.
		if d := time.Since(t0); d != 7*time.Second {
			t.Fatalf("connect across a partition healed at 5s took %s, want 7s (the next SYN)", d)
		}
		f.Partition(a, b)
		t0 = time.Now()
		_, err = a.DialContext(context.Background(), "tcp", ln.Addr().String())
		if !errors.Is(err, syscall.ETIMEDOUT) || time.Since(t0) != 127*time.Second {
			t.Fatalf("connect into a partition with no deadline: %v after %s, want ETIMEDOUT after 127s", err, time.Since(t0))
		}
	})
}

// listen binds a port of h for a test and returns the listener and port.
func listen(t *testing.T, h *Host) (net.Listener, int) {
	t.Helper()
	ln, err := h.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// dialAccept dials ln from h and returns both ends.
func dialAccept(t *testing.T, h *Host, ln net.Listener) (net.Conn, net.Conn) {
	t.Helper()
	c, err := h.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// echoes fails unless a byte written on w is read on r at once.
func echoes(t *testing.T, w, r net.Conn, what string) {
	t.Helper()
	t0 := time.Now()
	if _, err := w.Write([]byte{1}); err != nil {
		t.Fatalf("%s: write: %v", what, err)
	}
	if _, err := r.Read(make([]byte, 1)); err != nil || time.Since(t0) != 0 {
		t.Fatalf("%s: read: %v after %s, want the byte at once", what, err, time.Since(t0))
	}
}

// twoPorts is a fabric on which host a holds a connection to each of two
// ports of host b: c[i] is a's end of the one to port[i], s[i] b's.
type twoPorts struct {
	f    *Fabric
	a, b *Host
	ln   [2]net.Listener
	port [2]int
	c, s [2]net.Conn
}

func newTwoPorts(t *testing.T, seed uint64) twoPorts {
	t.Helper()
	f := New(seed)
	n := twoPorts{f: f, a: f.Host("a"), b: f.Host("b")}
	for i := range 2 {
		n.ln[i], n.port[i] = listen(t, n.b)
		n.c[i], n.s[i] = dialAccept(t, n.a, n.ln[i])
	}
	return n
}

func TestPartitionPortsCutsThosePortsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTwoPorts(t, 1)
		f, a, b, ln1, ln2, p1 := n.f, n.a, n.b, n.ln[0], n.ln[1], n.port[0]
		c1, s1 := n.c[0], n.s[0] // to the cut port
		c2, s2 := n.c[1], n.s[1] // to another port of b
		lnA, _ := listen(t, a)
		s3, c3 := dialAccept(t, b, lnA) // b dialled a, from an ephemeral port

		f.PartitionPorts("b.p1", p1)
		if _, err := c1.Write([]byte("during")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		read := async(func() (int, error) { return s1.Read(buf) })
		pending(t, read, "a read at a cut port")
		back := async(func() (int, error) { return c1.Read(make([]byte, 1)) })
		if _, err := s1.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		pending(t, back, "a read of what the cut port's side sent")
		echoes(t, c2, s2, "another port of the host")
		echoes(t, s2, c2, "another port of the host, back")
		echoes(t, s3, c3, "a connection the host dialled")
		echoes(t, c3, s3, "a connection the host dialled, back")

		// A connect to the cut port hangs; to the other port it completes.
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := a.DialContext(ctx, "tcp", ln1.Addr().String())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 3*time.Second {
			t.Fatalf("dial to a cut port: %v after %s, want the ctx's deadline at 3s", err, time.Since(t0))
		}
		c4, s4 := dialAccept(t, a, ln2)
		echoes(t, c4, s4, "a new connection to another port")

		// Healed: what was held comes with TCP's first retransmission
		// after the heal ("during", sent at t0: 0.2, 0.6, ... 12.6, 25.4 s).
		time.Sleep(10 * time.Second)
		f.HealPorts("b.p1")
		if r := <-read; r.err != nil || string(buf[:r.n]) != "during" {
			t.Fatalf("read after the heal: %q, %v", buf[:r.n], r.err)
		}
		if d := time.Since(t0); d != 25400*time.Millisecond {
			t.Fatalf("heal delivered after %s, want at the first retransmission after it (25.4s)", d)
		}
		if r := <-back; r.err != nil || r.n != 1 {
			t.Fatalf("read back after the heal: %d, %v", r.n, r.err)
		}
		echoes(t, c1, s1, "the healed port")

		// A cut port nobody listens on drops the SYN too: the connect
		// hangs instead of being refused.
		f.PartitionPorts("unbound", 9)
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := a.DialContext(ctx, "tcp", "127.0.0.1:9"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("dial to a cut port nobody listens on: %v, want the ctx's deadline", err)
		}
		f.HealPorts("unbound")
		if _, err := a.DialContext(context.Background(), "tcp", "127.0.0.1:9"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial to a healed port nobody listens on: %v, want refused", err)
		}
	})
}

func TestPartitionPortsReplacesByName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newTwoPorts(t, 1)
		f, p1, p2 := n.f, n.port[0], n.port[1]
		c1, s1, c2, s2 := n.c[0], n.s[0], n.c[1], n.s[1]
		f.PartitionPorts("b", p1, p2)
		f.PartitionPorts("b", p2) // the new fault replaces the old: p1 passes again
		echoes(t, c1, s1, "the port the new fault no longer lists")
		read := async(func() (int, error) { return s2.Read(make([]byte, 1)) })
		if _, err := c2.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		pending(t, read, "a read at the port both faults list")
		f.HealPorts("b")
		if r := <-read; r.err != nil {
			t.Fatalf("read after the heal: %v", r.err)
		}
	})
}

func TestLossPortsDelaysThosePortsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := newTwoPorts(t, 7)
		f := tp.f
		c1, s1, c2, s2 := tp.c[0], tp.s[0], tp.c[1], tp.s[1]
		f.LossPorts("b", 0.25, tp.port[0])
		const n = 200
		delayed := 0
		buf := make([]byte, 1)
		for range n {
			echoes(t, c2, s2, "another port of the lossy host")
			t0 := time.Now()
			if _, err := c1.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := s1.Read(buf); err != nil {
				t.Fatal(err)
			}
			if time.Since(t0) > 0 {
				delayed++
			}
		}
		if frac := float64(delayed) / n; frac < 0.15 || frac > 0.35 {
			t.Fatalf("%d of %d segments to the lossy port delayed (%.2f), want about 0.25", delayed, n, frac)
		}
		f.HealPorts("b")
		echoes(t, c1, s1, "the port after its loss ended")
	})
}

// TestAHealDelaysOnlyWhatTheCutHeld: a segment sent during a cut on a
// connection the cut does not hold, unread yet, is readable at once after
// the heal (Heal, HealPorts): only what a cut held waits for TCP's next
// retransmission.
func TestAHealDelaysOnlyWhatTheCutHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		a, b, c := f.Host("a"), f.Host("b"), f.Host("c")
		ca, sb := connected(t, a, b)
		_, pc := listen(t, c)
		buf := make([]byte, 8)
		for _, heal := range []struct {
			name     string
			cut, end func()
		}{
			{"Heal", func() { f.Partition(a, c) }, func() { f.Heal(a, c) }},
			{"HealPorts", func() { f.PartitionPorts("c", pc) }, func() { f.HealPorts("c") }},
		} {
			heal.cut()
			if _, err := ca.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			heal.end()
			t0 := time.Now()
			if n, err := sb.Read(buf); err != nil || string(buf[:n]) != "x" || time.Since(t0) != 0 {
				t.Errorf("after %s of another link: read %q, %v after %s; want the byte at once", heal.name, buf[:n], err, time.Since(t0))
			}
		}
	})
}

func TestCloseWithLingerZeroResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := New(1)
		a, b := connected(t, f.Host("a"), f.Host("b"))
		if err := a.(interface{ SetLinger(int) error }).SetLinger(0); err != nil {
			t.Fatal(err)
		}
		a.Close()
		if _, err := b.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after the peer's close with linger 0: %v, want ECONNRESET", err)
		}
		c, d := connected(t, f.Host("c"), f.Host("d"))
		c.(interface{ SetLinger(int) error }).SetLinger(5)
		c.Close()
		if _, err := d.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after the peer's close with linger 5: %v, want EOF", err)
		}
	})
}
