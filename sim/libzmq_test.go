package sim

import (
	"os"
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
// Real time: the mechanism, asserted with a margin, at vLLM's heartbeat
// compressed tenfold on both sides (200 ms, 1 s, 1 s), or at vLLM's own
// with P2PFAULT_SIM_LIBZMQ_VLLM_HB=1 (disconnected after 12.00 s here).
func TestLibzmqSeesAStoppedSimEngineDisconnected(t *testing.T) {
	ivl, timeout := 200*time.Millisecond, time.Second
	if os.Getenv("P2PFAULT_SIM_LIBZMQ_VLLM_HB") != "" {
		ivl, timeout = 2*time.Second, 10*time.Second
	}
	peer := zmqpeer.Start(t, zmqpeer.Options{HeartbeatIvl: ivl, HeartbeatTimeout: timeout, HeartbeatTTL: timeout})
	src := startEngine(t, "source-0", engineOpts{args: []string{
		"--sim-heartbeat-interval", ivl.String(), "--sim-heartbeat-timeout", timeout.String(),
	}})
	peer.Send(src.p2pID(), map[string]any{
		"type": "connect", "peer_id": peer.Addr, "agent_metadata": zmqpeer.Bytes([]byte("nixl")),
		"base_addr": 0, "num_blocks": 64, "block_len": 1, "config_fingerprint": "",
	})
	waitLog(t, src, "rejecting peer connect", 20*time.Second)
	time.Sleep(2 * ivl) // two heartbeats each way: the connection is idle but alive
	for _, l := range peer.Lines() {
		if strings.Contains(l, `"disconnected"`) {
			t.Fatalf("libzmq saw the running source disconnect: %s", l)
		}
	}
	src.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(-src.pid, syscall.SIGCONT) })
	ev := peer.Await(4*timeout+10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "disconnected" && e.Peer == src.p2pID() })
	took := ev.At.Sub(stopped)
	t.Logf("libzmq's monitor: %s disconnected %.2f s after SIGSTOP of the source's session (heartbeat %v/%v/%v; libzmq against libzmq at vLLM's 2/10/10 s: 11.99 s)", ev.Peer, took.Seconds(), ivl, timeout, timeout)
	// libzmq's window is the peer's last PING's TTL less an interval (8 s
	// at vLLM's) to its own unanswered PING plus the timeout (12 s).
	if lo, hi := timeout*7/10, 2*timeout+time.Second; took < lo || took > hi {
		t.Fatalf("disconnect %.2f s after SIGSTOP, want within [%v, %v] (libzmq's window with margin)", took.Seconds(), lo, hi)
	}
}
