package event

import "time"

// KindSchedule is the run's fault schedule, sent once after the run event
// and before any fault of it is played: Schedule. A scripted timeline's
// steps are its schedule; a nemesis' (run --nemesis) are drawn from its
// seed, and the event says how, so the same schedule can be drawn again.
const KindSchedule Kind = "schedule"

// ScheduleInfo is a run's fault schedule.
type ScheduleInfo struct {
	// Nemesis is the nemesis that drew it ("random"), "" for a scripted
	// timeline or a case's preset; the fields after it say how it drew.
	Nemesis      string        `json:"nemesis,omitempty"`
	Seed         int64         `json:"seed,omitempty"`
	Kinds        []string      `json:"kinds,omitempty"` // what it drew from: "stall", "loss=30%"
	Gap          time.Duration `json:"gap_ns,omitempty"`
	GapSpread    time.Duration `json:"gap_spread_ns,omitempty"`
	Length       time.Duration `json:"length_ns,omitempty"`
	LengthSpread time.Duration `json:"length_spread_ns,omitempty"`
	Settle       time.Duration `json:"settle_ns,omitempty"` // planned length of a fault without "for" (a kill's restart)
	Sources      []int         `json:"sources,omitempty"`
	AtOnce       int           `json:"at_once,omitempty"` // faults in force at once, at most
	// Timeline is the schedule in the timeline language at the seed's
	// time (before --time-scale): `run --timeline` plays it again.
	Timeline string `json:"timeline"`
	// Steps are the faults as the run plays them, since t0 (scaled).
	Steps []ScheduledFault `json:"steps"`
}

// ScheduledFault is one step of a schedule.
type ScheduledFault struct {
	At     time.Duration `json:"at_ns"` // since t0
	Action string        `json:"action"`
	Arg    string        `json:"arg,omitempty"`
	Source int           `json:"source"`
	// Target is one rank's name when the fault acts on one
	// ("source-0/rank1"); "" for the whole source.
	Target string        `json:"target,omitempty"`
	For    time.Duration `json:"for_ns,omitempty"`
}

// TargetName is what f acts on: its Target, or its source.
func (f ScheduledFault) TargetName() string { return targetName(f.Source, f.Target) }
