package zmtp

import (
	"context"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestOnDuplicateToldOnce: a ROUTER tells OnDuplicate the identity of the
// connection it ignores, once, and not for the first connection.
func TestOnDuplicateToldOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	synctest.Test(t, func(t *testing.T) {
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

// TestDataCancelsTheHeartbeatTimeout: any frame, a message as much as a
// PONG, cancels a ROUTER's armed heartbeat timeout (libzmq
// stream_engine_base.cpp decode_and_push), though a ROUTER's connection
// reads no clock for it: a peer that answers no PING but sends a message
// every second keeps its connection for as long as it does; once it falls
// silent the ROUTER closes it 10 s after its next PING.
func TestDataCancelsTheHeartbeatTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld()
		r := w.router(t, vllmHB)
		nc, err := w.cli.DialContext(context.Background(), "tcp", "127.0.0.1:7777")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		// A peer of raw bytes: greeting and READY, then messages only.
		nc.Write(appendGreeting(nil))
		nc.Write(appendFrame(nil, readyOf("Socket-Type", "DEALER", "Identity", "raw"), flagCommand))
		closed := make(chan time.Time, 1)
		go func() {
			io.Copy(io.Discard, nc) // the ROUTER's greeting, READY and PINGs, unanswered
			closed <- time.Now()
		}()
		start := time.Now()
		for range 30 {
			if _, err := nc.Write(appendFrame(nil, []byte("m"), 0)); err != nil {
				t.Fatal(err)
			}
			if id, _ := recvWithin(t, r, time.Second); id != "raw" {
				t.Fatalf("message from %q, want raw", id)
			}
			time.Sleep(time.Second)
		}
		select {
		case at := <-closed:
			t.Fatalf("the ROUTER closed the connection %v in, while a message came every second", at.Sub(start))
		default:
		}
		quiet := time.Now()
		got := (<-closed).Sub(quiet)
		if got <= 10*time.Second || got > 12*time.Second+inputFirst {
			t.Fatalf("closed %v after the last message, want 10 s after the next PING (PINGs every 2 s)", got)
		}
	})
}
