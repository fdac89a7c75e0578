package sim

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/zmqpeer"
)

// TestLibzmqSeesAStoppedSimEngineDisconnected: real libzmq (zmqpeer.py,
// sockets and heartbeats as vLLM's control/zmq.py: 2 s, 10 s, 10 s) holds
// a DEALER to a sim source's ROUTER; the source's whole session is
// SIGSTOPped, as the seed's stall does, and libzmq's monitor reports the
// DEALER disconnected after libzmq's own time: between the source's last
// PING's TTL less an interval (8 s) and libzmq's unanswered PING plus its
// timeout (12 s); libzmq against libzmq measured 11.99 s. The heartbeat is
// ZMTP's, under every session, so the connect is one the source rejects
// (another block_len): its "rejecting peer connect" line says the
// connection is up and carrying messages, and after the source's own
// connect (over its DEALER, the other connection) nothing more is sent.
// Real time, vLLM's own heartbeat: the mechanism, asserted with a margin.
func TestLibzmqSeesAStoppedSimEngineDisconnected(t *testing.T) {
	peer := zmqpeer.Start(t, zmqpeer.Options{})
	src := startEngine(t, "source-0", engineOpts{})
	peer.Send(src.p2pID(), map[string]any{
		"type": "connect", "peer_id": peer.Addr, "agent_metadata": zmqpeer.Bytes([]byte("nixl")),
		"base_addr": 0, "num_blocks": 64, "block_len": 1, "config_fingerprint": "",
	})
	waitLog(t, src, "rejecting peer connect", 20*time.Second)
	time.Sleep(4 * time.Second) // two heartbeats each way: the connection is idle but alive
	for _, l := range peer.Lines() {
		if strings.Contains(l, `"disconnected"`) {
			t.Fatalf("libzmq saw the running source disconnect: %s", l)
		}
	}
	src.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(-src.pid, syscall.SIGCONT) })
	ev := peer.Await(40*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "disconnected" && e.Peer == src.p2pID() })
	took := ev.At.Sub(stopped)
	t.Logf("libzmq's monitor: %s disconnected %.2f s after SIGSTOP of the source's session (vLLM's heartbeat 2/10/10 s; libzmq against libzmq: 11.99 s)", ev.Peer, took.Seconds())
	if lo, hi := 7*time.Second, 20*time.Second; took < lo || took > hi {
		t.Fatalf("disconnect %.2f s after SIGSTOP, want within [%v, %v] (libzmq's 8–12 s with margin)", took.Seconds(), lo, hi)
	}
}
