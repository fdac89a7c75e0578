package event

import "time"

// Condition is what a source is in, as the experiment knows it: the fault
// in force (a kind's action left it stalled, removed, ...) and its engine's
// process state together. The experiment computes it once and sends it as
// condition events; the faces render it, and fault's one refusal rule
// (Kind.Refusal) reads it. Its words are those of the refusals
// ("source-0 is stalled").
type Condition string

// Conditions.
const (
	CondUp          Condition = "up"          // running and ready, no fault in force
	CondStarting    Condition = "starting"    // not ready yet (a first start), or not seen yet
	CondStalled     Condition = "stalled"     // stopped until resumed
	CondRestarting  Condition = "restarting"  // on its way back (kill, restore)
	CondRemoved     Condition = "removed"     // down until restored
	CondExited      Condition = "exited"      // ended without being asked (a crash)
	CondUnreachable Condition = "unreachable" // an attached engine whose /health does not answer
	// CondNetwork: its packets are dropped (partition, loss) until healed.
	CondNetwork Condition = "faulted on the network"
)

// ConditionInfo is a source's condition when it changed: what the
// dashboard's source badge shows, and what the keys, the script and
// attach are refused by.
type ConditionInfo struct {
	Source    int       `json:"source"`
	Condition Condition `json:"condition"`
	// Fault is the kind whose action put the source in it (stall, kill,
	// partition, ...), "" when no fault is in force.
	Fault string `json:"fault,omitempty"`
	// Label is the badge's word: the kind's own (KILLED, PARTITIONED, ...)
	// or the condition's (READY, STALLED, RESTARTING, EXITED code 1, ...).
	Label string `json:"label"`
	// Until is when a timed fault ends by itself (a stall for 30 s), since
	// t0; 0 when it lasts until undone.
	Until time.Duration `json:"until_ns,omitempty"`
	// Target is the one data-parallel rank the fault in force acts on
	// alone ("source-0/rank1": a stall of one engine core), "" when it is
	// on the whole source; the badge names it, so a stall of one rank does
	// not read as the whole engine's.
	Target string `json:"target,omitempty"`
	// Down: the engine's process is gone and not started again yet (a
	// kill before the restart begins, a crash).
	Down bool `json:"down,omitempty"`
}
