package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestInFlightLineNamesWhatThePullsWaitOn: once the decoder's log says a
// new session with source-0's peer awaits its connect_ack, source-0's
// panel names the wait instead of the oldest pull's age; when the session
// is reaped it goes back to the age.
func TestInFlightLineNamesWhatThePullsWaitOn(t *testing.T) {
	const peer = "127.0.0.1:7777"
	sc := sceneInFlight()
	addr := event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{Source: 0, URL: "http://127.0.0.1:8100", P2P: peer}}
	wait := event.Event{T: 22 * time.Second, Kind: event.KindWait, Wait: &event.Wait{Peer: peer, What: event.CauseHandshake, Open: true,
		Since: 20500 * time.Millisecond, Timer: &event.Timer{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: 30 * time.Second}}}
	base := append([]event.Event{addr}, sc.events...)
	sc.events = append(append([]event.Event{}, base...), wait)
	out := feed(t, sc, 160, 48).View()
	if want := "in flight 24: handshake with 127.0.0.1:7777 since 20.5 s (deadline 30 s)"; !strings.Contains(out, want) {
		t.Errorf("source-0's panel lacks %q:\n%s", want, out)
	}
	if !strings.Contains(out, "in flight 0") {
		t.Error("the healthy source's panel lacks \"in flight 0\"")
	}
	reaped := event.Event{T: 22 * time.Second, Kind: event.KindWait, Wait: &event.Wait{Peer: peer, What: event.CauseHandshake, Since: 21500 * time.Millisecond}}
	sc.events = append(append(append([]event.Event{}, base...), wait), reaped)
	out = feed(t, sc, 160, 48).View()
	if strings.Contains(out, "handshake with") || !strings.Contains(out, "in flight 24, oldest ") {
		t.Errorf("after the reap the panel should show the oldest's age, not a wait:\n%s", out)
	}
}
