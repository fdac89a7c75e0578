package memnet

import (
	"net"
	"testing"
	"testing/synctest"
)

// idleFabric is a fabric with a connected pair (c, s) and idle
// connections whose every end is blocked in Read, as engines' readers are.
func idleFabric(t *testing.T, idle int) (f *Fabric, a, b *Host, c, s net.Conn) {
	t.Helper()
	f = New(1)
	a, b = f.Host("a"), f.Host("b")
	ln, _ := listen(t, b)
	for range idle {
		ic, is := dialAccept(t, a, ln)
		for _, e := range []net.Conn{ic, is} {
			go func() { _, _ = e.Read(make([]byte, 1)) }()
			t.Cleanup(func() { e.Close() })
		}
	}
	c, s = dialAccept(t, a, ln)
	return f, a, b, c, s
}

// wakes is how many waits of f ended so far, once every goroutine of the
// bubble is blocked again.
func wakes(f *Fabric) int {
	synctest.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wakes
}

func TestAWriteWakesOnlyTheReaderOfTheOtherEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _, _, c, s := idleFabric(t, 16)
		got := async(func() (int, error) { return s.Read(make([]byte, 1)) })
		w0 := wakes(f)
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if r := <-got; r.err != nil || r.n != 1 {
			t.Fatalf("read: %d, %v", r.n, r.err)
		}
		if n := wakes(f) - w0; n != 1 {
			t.Fatalf("a write beside 32 idle readers ended %d waits, want 1 (its reader's)", n)
		}
	})
}

func TestAReadWakesOnlyTheWriterWaitingForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _, _, c, s := idleFabric(t, 16)
		full := make([]byte, SocketBuffer)
		if _, err := c.Write(full); err != nil {
			t.Fatal(err)
		}
		wrote := async(func() (int, error) { return c.Write([]byte{1}) })
		pending(t, wrote, "a write into a full socket buffer")
		w0 := wakes(f)
		if _, err := s.Read(full[:1]); err != nil {
			t.Fatal(err)
		}
		if r := <-wrote; r.err != nil || r.n != 1 {
			t.Fatalf("blocked write: %d, %v", r.n, r.err)
		}
		if n := wakes(f) - w0; n != 1 {
			t.Fatalf("a read beside 32 idle readers ended %d waits, want 1 (the writer's)", n)
		}
	})
}

func TestFabricWideFaultsWakeEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, a, b, _, _ := idleFabric(t, 16)
		w0 := wakes(f)
		f.Partition(a, b)
		if n := wakes(f) - w0; n != 32 {
			t.Fatalf("a partition ended %d waits, want the 32 idle readers'", n)
		}
		w0 = wakes(f)
		a.Freeze()
		if n := wakes(f) - w0; n != 16 {
			t.Fatalf("a freeze ended %d waits, want its host's 16 readers'", n)
		}
	})
}
