package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestSlowPullsAreNamedByTheirCause: as the slow pulls of a stall end, the
// event log names what ended them (their cause and timer, one line per
// cause), and source-0's panel counts its window's pulls by cause; the
// replay of the same events, read back from their file, too.
func TestSlowPullsAreNamedByTheirCause(t *testing.T) {
	opened := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 8 * time.Second, Recovers: true, Kind: "stall"}}
	closed := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 8 * time.Second, End: 38 * time.Second, Recovers: true, Kind: "stall"}}
	hb := &event.Timer{Name: "HEARTBEAT_TIMEOUT", Value: 10 * time.Second}
	hs := &event.Timer{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: 30 * time.Second}
	pull := func(start, lat float64, c event.Cause, tm *event.Timer) event.Sample {
		return event.Sample{Source: 0, Start: time.Duration(start * float64(time.Second)), Latency: time.Duration(lat * float64(time.Second)),
			Status: 200, PromptTokens: 400, Cause: c, Timer: tm}
	}
	sc := withEvents(sceneSteady(), 8*time.Second, opened)
	sc = withEvents(sc, 20*time.Second, event.Event{Kind: event.KindSamples, Samples: []event.Sample{
		pull(8.5, 11.5, event.CauseHeartbeat, hb), pull(9, 11, event.CauseHeartbeat, hb)}})
	sc = withEvents(sc, 38*time.Second, closed)
	sc = withEvents(sc, 50*time.Second, event.Event{Kind: event.KindSamples, Samples: []event.Sample{
		pull(20, 30, event.CauseHandshake, hs), pull(30, 20, event.CauseHandshake, hs), pull(35, 15, event.CauseHandshake, hs),
		pull(36, 0.01, event.CauseLocal, nil)}})
	m := feed(t, sc, 160, 48)
	// The replay reads the same events back from a file (their JSON: the
	// cause and the timer), at the stream's end.
	r := fromFile(t, writeEvents(t, sc.events), 160, 48)
	r.seek(wallAt(sc.now))
	for _, view := range []string{m.View(), r.View()} {
		assertHasWhy(t, view)
	}
}

func assertHasWhy(t *testing.T, view string) {
	t.Helper()
	for _, want := range []string{
		"slow: 2 pulls of source-0 took 11.0s–11.5s: waited until the session was reaped on the heartbeat (HEARTBEAT_TIMEOUT 10 s)",
		"slow: 3 pulls of source-0 took 15.0s–30.0s: waited on a new session until the handshake deadline (VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s)",
		// In event.Causes' order, the fast local miss too.
		"why local 1 · heartbeat 2 · handshake 3 (window at 8.0s)",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %q:\n%s", want, view)
		}
	}
}

// TestWhyCountsTheRecoveryWindowToo: the pulls sent after a stall's window
// closed, in its recovery window (25 s by default), are counted on their
// own line, as the report's why table counts them "after"; a pull sent
// past the recovery window is in neither, and one sent in the window stays
// on the window's line. The replay of the same events reads the same.
func TestWhyCountsTheRecoveryWindowToo(t *testing.T) {
	opened := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 8 * time.Second, Recovers: true, Kind: "stall"}}
	closed := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 8 * time.Second, End: 30 * time.Second, Recovers: true, Kind: "stall"}}
	hs := &event.Timer{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: 30 * time.Second}
	pull := func(start, lat float64, c event.Cause, tm *event.Timer) event.Sample {
		return event.Sample{Source: 0, Start: time.Duration(start * float64(time.Second)), Latency: time.Duration(lat * float64(time.Second)),
			Status: 200, PromptTokens: 400, Cause: c, Timer: tm}
	}
	sc := withEvents(sceneSteady(), 8*time.Second, opened)
	sc = withEvents(sc, 30*time.Second, closed)
	sc = withEvents(sc, 60*time.Second, event.Event{Kind: event.KindSamples, Samples: []event.Sample{
		pull(20, 30, event.CauseHandshake, hs),                                         // in the window
		pull(31, 19, event.CauseHandshake, hs), pull(40, 10, event.CauseHandshake, hs), // after it
		pull(52, 0.05, event.CauseP2P, nil), pull(54.9, 0.05, event.CauseP2P, nil),
		pull(55, 0.05, event.CauseP2P, nil), // at the recovery window's end: in neither
	}})
	m := feed(t, sc, 160, 48)
	r := fromFile(t, writeEvents(t, sc.events), 160, 48)
	r.seek(wallAt(sc.now))
	for _, view := range []string{m.View(), r.View()} {
		for _, want := range []string{
			"why handshake 1 (window at 8.0s)",
			"after p2p 2 · handshake 2 (recovery 30.0s–55.0s)",
		} {
			if !strings.Contains(view, want) {
				t.Errorf("view lacks %q:\n%s", want, view)
			}
		}
	}
}

// TestALongWhyLineLeavesTheColumnBetweenPanels: at 80 columns the why line
// of source-0's panel is cut short of the panel's last column, which stays
// blank, so source-1's panel beside it does not read as its continuation.
func TestALongWhyLineLeavesTheColumnBetweenPanels(t *testing.T) {
	opened := event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 8 * time.Second, Recovers: true, Kind: "stall"}}
	lk := &event.Timer{Name: "lookup", Value: 8 * time.Second}
	var pulls []event.Sample
	hb := &event.Timer{Name: "HEARTBEAT_TIMEOUT", Value: 10 * time.Second}
	for i := range 16 {
		c, tm := event.CauseLookupDeadline, lk
		if i%4 == 0 {
			c, tm = event.CauseHeartbeat, hb
		}
		pulls = append(pulls, event.Sample{Source: 0, Start: 8*time.Second + time.Duration(i)*100*time.Millisecond,
			Latency: 8 * time.Second, Status: 200, PromptTokens: 400, Cause: c, Timer: tm})
	}
	sc := withEvents(sceneSteady(), 8*time.Second, opened)
	sc = withEvents(sc, 17*time.Second, event.Event{Kind: event.KindSamples, Samples: pulls})
	m := feed(t, sc, 80, 24)
	for _, line := range strings.Split(m.View(), "\n") {
		if !strings.HasPrefix(line, "why ") {
			continue
		}
		cells := []rune(line)
		if len(cells) < 40 || cells[39] != ' ' {
			t.Errorf("source-0's why line fills its panel's last column:\n%q", line)
		}
		return
	}
	t.Errorf("no why line at 80 columns:\n%s", m.View())
}
