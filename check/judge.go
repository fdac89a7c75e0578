package check

import "p2pfault/event"

// Judged is the window a run is judged on, the one rule the experiment
// and the reports share: with a scripted timeline, the first scripted
// fault's window; without (faults fired from keys), the latest fault's.
// ok is false when no fault opened a window.
func Judged(windows []event.Window, scripted bool) (w event.Window, ok bool) {
	if len(windows) == 0 {
		return event.Window{}, false
	}
	if scripted {
		return windows[0], true
	}
	return windows[len(windows)-1], true
}
