package ui

import (
	"bytes"
	"slices"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"p2pfault/event"
	"p2pfault/fault"
)

// program runs the dashboard in a teatest program fed by a live channel,
// with the scene's events already sent.
func program(t *testing.T, sc scene) (*teatest.TestModel, chan event.Event) {
	t.Helper()
	events := make(chan event.Event, len(sc.events)+16)
	for _, ev := range sc.events {
		events <- ev
	}
	m := New(sc.ctrl, sc.ctrl.tee(events), Options{
		Now:      func() time.Time { return wallAt(sc.now) },
		Renderer: asciiRenderer(),
		Frame:    5 * time.Millisecond,
		Clock:    50 * time.Millisecond,
	})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
	t.Cleanup(func() {
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
		close(events) // unblocks the feed's goroutine
	})
	return tm, events
}

func waitOutput(t *testing.T, tm *teatest.TestModel, want string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(want)) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

func waitCall(t *testing.T, f *fakeCtrl, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-f.called:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("the controller was not asked %q; calls: %q", want, f.Calls())
		}
	}
}

func sendKey(tm *teatest.TestModel, k string) { tm.Send(keyMsg(k)) }

func TestProgramStallsTheSelectedSourceAndTabMovesTheSelection(t *testing.T) {
	sc := sceneSteady()
	tm, _ := program(t, sc)
	waitOutput(t, tm, "READY")

	sendKey(tm, "s")
	waitCall(t, sc.ctrl, "stall 0")

	sendKey(tm, "tab")
	waitOutput(t, tm, "▶ source-1")
	sendKey(tm, "s")
	waitCall(t, sc.ctrl, "stall 1")
}

func TestProgramHelpKeyTogglesTheFullHelp(t *testing.T) {
	tm, _ := program(t, sceneSteady())
	waitOutput(t, tm, "? more")
	sendKey(tm, "?")
	waitOutput(t, tm, "close help")
	sendKey(tm, "?")
	waitOutput(t, tm, "? more")
}

func TestProgramQuitEndsCleanly(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		t.Run(k, func(t *testing.T) {
			tm, _ := program(t, sceneSteady())
			waitOutput(t, tm, "READY")
			sendKey(tm, k)
			final, ok := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(Model)
			if !ok || !final.quitting {
				t.Errorf("%s: final model %T quitting=%v", k, final, final.quitting)
			}
		})
	}
}

func TestProgramStallOnARemovedSourceSaysWhyAndCallsNothing(t *testing.T) {
	sc := sceneSteady()
	tm, events := program(t, sc)
	waitOutput(t, tm, "READY")

	// The source is removed while the dashboard runs.
	for _, ev := range []event.Event{faultEv(fault.ActionRemove, 0), engineEv(0, event.StateRemoved),
		condEv(event.ConditionInfo{Source: 0, Condition: event.CondRemoved, Fault: fault.ActionRemove, Label: "REMOVED"})} {
		ev.T, ev.Wall = sc.now, wallAt(sc.now)
		events <- ev
	}
	waitOutput(t, tm, "REMOVED")

	sendKey(tm, "s")
	waitOutput(t, tm, "source-0 is removed; press u to bring it back")
	// A key that does act, after it, proves the refused one was handled
	// and called nothing.
	sendKey(tm, "u")
	waitCall(t, sc.ctrl, "restore 0")
	if calls := sc.ctrl.Calls(); slices.Contains(calls, "stall 0") {
		t.Errorf("s on a removed source called the controller: %q", calls)
	}
}

func TestProgramFollowsLiveEvents(t *testing.T) {
	sc := sceneSteady()
	tm, events := program(t, sc)
	waitOutput(t, tm, "READY")
	ev := faultEv(fault.ActionStall, 1)
	ev.Fault.Duration = 30 * time.Second
	cond := condEv(event.ConditionInfo{Source: 1, Condition: event.CondStalled, Fault: fault.ActionStall, Label: "STALLED", Until: sc.now + 30*time.Second})
	for _, e := range []event.Event{ev, cond} {
		e.T, e.Wall = sc.now, wallAt(sc.now)
		events <- e
	}
	waitOutput(t, tm, "STALLED 30s")
	tm.Send(tea.WindowSizeMsg{Width: 160, Height: 48})
	waitOutput(t, tm, "stall source-1 (key) for 30s")
}
