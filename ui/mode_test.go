package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestHeaderSaysPDModeAndTheLogANewAddress: a run of mode pd says so in the
// header (p2p, the seed's, goes unsaid), and a replaced source's new
// address is an event log line.
func TestHeaderSaysPDModeAndTheLogANewAddress(t *testing.T) {
	for _, mode := range []string{"", event.ModeP2P, event.ModePD} {
		var s script
		info := runInfo("replace", 2, 1)
		info.Mode = mode
		s.run(info)
		s.upCluster(2)
		sc := withEvents(scene{events: s.events, now: 12 * time.Second, ctrl: newFakeCtrl()}, 11*time.Second,
			event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{Source: 0, URL: "http://127.0.0.1:23110", P2P: "127.0.0.1:18313", At: 11 * time.Second}},
			event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{Source: 0, URL: "http://127.0.0.1:23110", P2P: "127.0.0.1:18313", Prev: "127.0.0.1:7777", At: 11 * time.Second}})
		m := feed(t, sc, 160, 48)
		head := strings.Join(strings.Split(m.View(), "\n")[:2], "\n")
		if got := strings.Contains(head, "mode pd"); got != (mode == event.ModePD) {
			t.Errorf("mode %q: header says mode pd: %v\n%s", mode, got, head)
		}
		if log := logText(m); strings.Count(log, "pulls name") != 1 || !strings.Contains(log, "source-0: pulls name 127.0.0.1:18313 from now on, not 127.0.0.1:7777") {
			t.Errorf("event log:\n%s", log)
		}
	}
}
