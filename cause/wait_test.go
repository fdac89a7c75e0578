package cause

import (
	"testing"
)

// TestWaitOf: the sim's line as a new session's connect goes out opens a
// handshake wait dated from the session's opening, with its deadline; the
// session ready, its handshake timing out or its peer down closes it; a
// line that says neither is no wait.
func TestWaitOf(t *testing.T) {
	for _, tt := range []struct {
		line        string
		ok, open    bool
		since, dead float64
	}{
		{"INFO 12-02 02:32:00 [p2p] P2PSession 127.0.0.1:7777: connect sent, awaiting connect_ack (handshake timeout 30.0s, session opened 0.5s ago)", true, true, 21.5, 30},
		{"INFO 12-02 02:32:00 [p2p] peer 127.0.0.1:7777 connected", true, false, 22, 0},
		{"INFO 12-02 02:32:00 [p2p] peer 127.0.0.1:7777 connected (12 connects refused while it was down)", true, false, 22, 0},
		{"WARNING 12-02 02:32:00 [p2p] P2PSession 127.0.0.1:7777: handshake timed out after 30.0s — marking connection dead", true, false, 22, 0},
		{"WARNING 12-02 02:32:00 [p2p] P2P 127.0.0.1:7779: peer 127.0.0.1:7777 down: heartbeat timed out after 10.0s", true, false, 22, 0},
		{"WARNING 12-02 02:32:00 [p2p] P2PSession 127.0.0.1:7777: 3f0c timed out, sending abort (load timeout 30.0s)", false, false, 0, 0},
		{"INFO: Application startup complete.", false, false, 0, 0},
	} {
		w, ok := WaitOf(sec(22), tt.line)
		if ok != tt.ok {
			t.Errorf("%q: ok %v, want %v", tt.line, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		if w.Peer != peer || w.Open != tt.open || w.Since != sec(tt.since) {
			t.Errorf("%q: %+v, want peer %s open %v since %gs", tt.line, w, peer, tt.open, tt.since)
		}
		if tt.open && (w.Timer == nil || w.Timer.Name != TimerHandshake || w.Timer.Value != sec(tt.dead)) {
			t.Errorf("%q: timer %+v, want %s %gs", tt.line, w.Timer, TimerHandshake, tt.dead)
		}
	}
}
