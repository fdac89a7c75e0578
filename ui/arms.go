package ui

import "p2pfault/event"

// arms is the dashboard's state per arm, keyed by the arm every event
// carries, in the order the arms first appeared. A stream written before
// events carried their arm (Arm "") folds into the first arm.
type arms struct {
	order []string
	by    map[string]*state

	maxPoints, logLines int
}

func newArms(maxPoints, logLines int) *arms {
	a := &arms{by: map[string]*state{}, maxPoints: maxPoints, logLines: logLines}
	// The state shown before any event names its arm.
	a.order, a.by[""] = []string{""}, newState(maxPoints, logLines)
	return a
}

// of returns arm's state, creating it on first sight.
func (a *arms) of(arm string) *state {
	if st, ok := a.by[arm]; ok {
		return st
	}
	if len(a.order) == 1 && a.order[0] == "" && arm != "" {
		// The first arm named takes over the state kept so far.
		st := a.by[""]
		delete(a.by, "")
		a.order[0], a.by[arm] = arm, st
		return st
	}
	if arm == "" {
		return a.by[a.order[0]]
	}
	st := newState(a.maxPoints, a.logLines)
	a.order = append(a.order, arm)
	a.by[arm] = st
	return st
}

// first is the state of the arm shown (the only one today).
func (a *arms) first() *state { return a.by[a.order[0]] }

// route is the state an event folds into.
func (a *arms) route(ev event.Event) *state { return a.of(ev.Arm) }
