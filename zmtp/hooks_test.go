package zmtp

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/internal/raceguard"
)

// TestOnDuplicateToldOnce: a ROUTER tells OnDuplicate the identity of the
// connection it ignores, once, and not for the first connection.
func TestOnDuplicateToldOnce(t *testing.T) {
	raceguard.Test(t, func(t *testing.T) {
		w := newWorld()
		var mu sync.Mutex
		var told []string
		r := w.router(t, Options{OnDuplicate: func(id []byte) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, string(id))
		}})
		a := w.dealer(t, "X", Options{})
		a.Connect("127.0.0.1:7777")
		a.Send([]byte("a1"))
		recvWithin(t, r, time.Second)
		b := w.dealer(t, "X", Options{})
		b.Connect("127.0.0.1:7777")
		nextEvent(t, b, HandshakeSucceeded, time.Second)
		time.Sleep(10 * time.Millisecond) // past the ROUTER's second look
		mu.Lock()
		defer mu.Unlock()
		if len(told) != 1 || told[0] != "X" {
			t.Fatalf("OnDuplicate told %q, want [X]", told)
		}
	})
}

// TestLastHeardCountsPongs: a DEALER's LastHeard is zero before its
// connection is up, then the time of the last frame received, the PONGs
// to its PINGs included; it stays put while the peer is stopped and is
// zero again once the connection is lost.
func TestLastHeardCountsPongs(t *testing.T) {
	raceguard.Test(t, func(t *testing.T) {
		w := newWorld()
		srvHB := vllmHB
		srvHB.HeartbeatIvl = 0 // only the DEALER's PINGs, answered by PONGs
		w.router(t, srvHB)
		d := w.dealer(t, "cli:1", vllmHB)
		if !d.LastHeard().IsZero() {
			t.Fatalf("LastHeard %v before Connect", d.LastHeard())
		}
		d.Connect("127.0.0.1:7777")
		up := nextEvent(t, d, HandshakeSucceeded, time.Second).At
		time.Sleep(5 * time.Second)
		if got := d.LastHeard().Sub(up); got != 4*time.Second {
			t.Fatalf("LastHeard %v after the handshake, want 4s (the PONG to the PING at 4 s)", got)
		}
		w.srv.Freeze()
		defer w.srv.Thaw()
		time.Sleep(5 * time.Second)
		if got := d.LastHeard().Sub(up); got != 4*time.Second {
			t.Fatalf("LastHeard moved to %v while the peer is stopped", got)
		}
		nextEvent(t, d, Disconnected, time.Minute)
		synctest.Wait() // the DEALER is past that connection, waiting to redial
		if !d.LastHeard().IsZero() {
			t.Fatalf("LastHeard %v with no connection up", d.LastHeard())
		}
	})
}
