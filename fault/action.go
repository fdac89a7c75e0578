package fault

import "p2pfault/event"

// Action is one fault to take: a kind, the source it acts on and its
// options. Each edge that asks for a fault makes one, once: a dashboard
// key (its kind and the selected source), a timeline line (Parse, Preset)
// and a nemesis draw (Nemesis.Schedule). From there to the target the
// kind travels as the value it was registered as: nobody turns it back
// into its name to look it up again.
type Action struct {
	Kind   *Kind
	Source int
	Options
}

// String is the action as a message names it: "stall source-0".
func (a Action) String() string { return a.Kind.Name + " " + event.SourceName(a.Source) }
