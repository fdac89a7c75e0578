package ui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
	"p2pfault/fault"
)

// eventsMsg is a batch of run events: everything that was queued when the
// feed woke up, so the dashboard redraws once per batch, not per event.
type eventsMsg struct {
	events []event.Event
	closed bool // the channel closed after these events
}

// clockMsg moves countdowns and the elapsed time between events.
type clockMsg struct{}

// actionDoneMsg is the outcome of a Controller call a key made.
type actionDoneMsg struct {
	key    string // the key, as a refusal names it ("s: ...")
	action fault.Action
	err    error
}

// logTailMsg carries an engine's last log lines for the full-screen log.
type logTailMsg struct {
	engine string
	lines  []string
}

// failTailsMsg carries the last log lines of the engines that did not come up.
type failTailsMsg struct{ tails []engineTail }

// maxBatch bounds one batch so a flood of events cannot starve the keys.
const maxBatch = 4096

// waitEvents is the realtime feed: it waits gap (so batches come at most
// ~10 a second), blocks for the next event, then drains what is already
// queued and returns it as one message. The Model re-arms it after each
// batch. done unblocks it when the dashboard is shut down.
func waitEvents(events <-chan event.Event, done <-chan struct{}, gap time.Duration) tea.Cmd {
	return func() tea.Msg {
		if gap > 0 {
			t := time.NewTimer(gap)
			select {
			case <-t.C:
			case <-done:
				t.Stop()
				return nil
			}
		}
		var first event.Event
		var ok bool
		select {
		case first, ok = <-events:
		case <-done:
			return nil
		}
		if !ok {
			return eventsMsg{closed: true}
		}
		batch := []event.Event{first}
		for len(batch) < maxBatch {
			select {
			case ev, ok := <-events:
				if !ok {
					return eventsMsg{events: batch, closed: true}
				}
				batch = append(batch, ev)
			default:
				return eventsMsg{events: batch}
			}
		}
		return eventsMsg{events: batch}
	}
}

// clockTick schedules the next clockMsg.
func clockTick(d time.Duration) tea.Cmd {
	return tea.Tick(d, func(time.Time) tea.Msg { return clockMsg{} })
}

// controllerAction fires the action key made.
func controllerAction(ctrl Controller, key string, a fault.Action) tea.Cmd {
	return func() tea.Msg {
		return actionDoneMsg{key: key, action: a, err: ctrl.Fire(a)}
	}
}

// armAction fires the action key made on one arm.
func armAction(ctrl ArmController, arm, key string, a fault.Action) tea.Cmd {
	return func() tea.Msg {
		return actionDoneMsg{key: key, action: a, err: ctrl.FireArm(arm, a)}
	}
}

// setProbing pauses or resumes the probe.
func setProbing(ctrl Controller, on bool) tea.Cmd {
	return func() tea.Msg {
		ctrl.SetProbing(on)
		return nil
	}
}

// fetchLogTail reads an engine's last n log lines.
func fetchLogTail(ctrl Controller, engine string, n int) tea.Cmd {
	return func() tea.Msg {
		return logTailMsg{engine: engine, lines: cleanLines(ctrl.LogTail(engine, n))}
	}
}

// fetchFailTails reads the last log lines of each engine that did not come up.
func fetchFailTails(ctrl Controller, engines []string, n int) tea.Cmd {
	return func() tea.Msg {
		tails := make([]engineTail, 0, len(engines))
		for _, e := range engines {
			tails = append(tails, engineTail{engine: e, lines: cleanLines(ctrl.LogTail(e, n))})
		}
		return failTailsMsg{tails: tails}
	}
}
