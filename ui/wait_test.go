package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// waitScene is sceneInFlight (24 pulls naming source-0 in flight at
// 22 s, the oldest sent at 10 s) with source-0's P2P address told and,
// when wait is not nil, the decoder's log saying what those pulls wait on.
func waitScene(peer string, wait *event.Wait) scene {
	sc := sceneInFlight()
	addr := event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{Source: 0, URL: "http://127.0.0.1:8100", P2P: peer}}
	sc.events = append([]event.Event{addr}, sc.events...)
	if wait != nil {
		sc.events = append(sc.events, event.Event{T: 22 * time.Second, Kind: event.KindWait, Wait: wait})
	}
	return sc
}

// handshakeSince is a handshake wait with peer open since since, its
// deadline deadline after it.
func handshakeSince(peer string, since, deadline time.Duration) *event.Wait {
	return &event.Wait{Peer: peer, What: event.CauseHandshake, Open: true, Since: since,
		Timer: &event.Timer{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: deadline}}
}

// TestInFlightLineNamesWhatThePullsWaitOn: once the decoder's log says a
// new session with source-0's peer awaits its connect_ack, source-0's
// panel keeps the count and the oldest pull's age (12.0 s: sent at 10 s,
// not the 20.5 s the wait began) and names the wait with its deadline as
// time left (20.5 + 30 − 22 = 28.5 s); on a 160-column screen all on one
// line. When the session is reaped it goes back to the age alone.
func TestInFlightLineNamesWhatThePullsWaitOn(t *testing.T) {
	const peer = "127.0.0.1:7777"
	sc := waitScene(peer, handshakeSince(peer, 20500*time.Millisecond, 30*time.Second))
	out := feed(t, sc, 160, 48).View()
	if want := "◆ in flight 24, oldest 12.0s: handshake with 127.0.0.1:7777, deadline in 28.5s"; !strings.Contains(out, want) {
		t.Errorf("source-0's panel lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "since 20.5") {
		t.Errorf("the panel shows when the wait began, which reads as an age:\n%s", out)
	}
	if !strings.Contains(out, "in flight 0") {
		t.Error("the healthy source's panel lacks \"in flight 0\"")
	}
	reaped := event.Event{T: 22 * time.Second, Kind: event.KindWait, Wait: &event.Wait{Peer: peer, What: event.CauseHandshake, Since: 21500 * time.Millisecond}}
	sc.events = append(sc.events, reaped)
	out = feed(t, sc, 160, 48).View()
	if strings.Contains(out, "handshake") || !strings.Contains(out, "in flight 24, oldest 12.0s") {
		t.Errorf("after the reap the panel should show the oldest's age, not a wait:\n%s", out)
	}
}

// TestInFlightLineWholeAt80Columns: on an 80×24 dashboard each source's
// panel is 40 columns wide, too narrow for the count, the age, the wait
// and its deadline on one line: the count and age keep their line and
// the wait goes under it without the address, nothing cut ("…").
func TestInFlightLineWholeAt80Columns(t *testing.T) {
	const peer = "127.0.0.1:7777"
	out := feed(t, waitScene(peer, handshakeSince(peer, 20500*time.Millisecond, 30*time.Second)), 80, 24).View()
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "◆ in flight 24") {
			continue
		}
		left := []rune(line)[:40]
		if got, want := strings.TrimRight(string(left), " "), "◆ in flight 24, oldest 12.0s"; got != want {
			t.Errorf("source-0's in-flight line reads %q, want %q:\n%s", got, want, out)
		}
		if i+1 == len(lines) {
			t.Fatalf("nothing under the in-flight line:\n%s", out)
		}
		under := strings.TrimRight(string([]rune(lines[i+1])[:40]), " ")
		if want := "  handshake, deadline in 28.5s"; under != want {
			t.Errorf("under it %q, want %q:\n%s", under, want, out)
		}
		return
	}
	t.Errorf("no in-flight line of source-0 at 80×24:\n%s", out)
}

// TestInFlightLineWaitWords: the wait's words at each width and deadline,
// from the whole line down to the wait under the count; a deadline behind
// says so rather than counting down past zero; a wait whose line told no
// timer has no deadline.
func TestInFlightLineWaitWords(t *testing.T) {
	const now = 22 * time.Second
	cases := []struct {
		name string
		peer string
		wait *event.Wait
		w    int
		want []string
	}{
		{"whole", "127.0.0.1:7777", handshakeSince("127.0.0.1:7777", 20*time.Second, 30*time.Second), 79,
			[]string{"◆ in flight 24, oldest 12.0s: handshake with 127.0.0.1:7777, deadline in 28.0s"}},
		{"a long address goes first", "10.244.120.133:17777", handshakeSince("10.244.120.133:17777", 20*time.Second, 30*time.Second), 79,
			[]string{"◆ in flight 24, oldest 12.0s: handshake, deadline in 28.0s"}},
		{"the wait under the count, with its address", "127.0.0.1:7777", handshakeSince("127.0.0.1:7777", 20*time.Second, 30*time.Second), 55,
			[]string{"◆ in flight 24, oldest 12.0s", "  handshake with 127.0.0.1:7777, deadline in 28.0s"}},
		{"past the deadline", "127.0.0.1:7777", handshakeSince("127.0.0.1:7777", 10*time.Second, 10500*time.Millisecond), 39,
			[]string{"◆ in flight 24, oldest 12.0s", "  handshake, deadline passed 1.5s ago"}},
		{"no timer told", "127.0.0.1:7777", &event.Wait{Peer: "127.0.0.1:7777", What: event.CauseHandshake, Open: true, Since: 20 * time.Second}, 79,
			[]string{"◆ in flight 24, oldest 12.0s: handshake with 127.0.0.1:7777"}},
	}
	s := NewStyles(asciiRenderer())
	st := &s
	for _, c := range cases {
		l := inflightLine{shown: true, n: 24, oldest: 12 * time.Second, wait: c.wait, now: now}
		got := l.lines(st, c.w)
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		for _, line := range got {
			if textWidth(line) > c.w {
				t.Errorf("%s: %q is %d columns, wider than %d", c.name, line, textWidth(line), c.w)
			}
		}
	}
}
