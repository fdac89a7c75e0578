package sim

import (
	"slices"
	"strings"
)

// Arm is a build of vLLM the simulated engine stands for, and the
// `sim serve` flags that select it: p2pfault's --arms names arms of this
// table, so runs of the sim compare vLLM builds side by side.
type Arm struct {
	Name  string
	Args  []string // `sim serve` flags, before any the user gives
	Build string   // which vLLM, as docs and errors say it
}

// Arms are the simulated engine's arms. main and fixed are the seed's
// two builds (its table's rows); today and pr56836 are vLLM main as read
// later and its open fix for an unanswered lookup, which only a fault
// that keeps the heartbeats up tells apart (the half-open case).
var Arms = []Arm{
	{"main", []string{"--p2p-pending-handshake=wait"},
		"vLLM main as the seed ran it: a pending handshake is waited on, a lookup ends at the 8 s lookup deadline"},
	{"fixed", []string{"--p2p-pending-handshake=prefill"},
		"main + PR #64501: prefill locally while a handshake is pending"},
	{"today", []string{"--p2p-pending-handshake=wait", "--sim-lookup-deadline=none"},
		"vLLM main @099ef822: no lookup deadline, an unanswered lookup waits until its request ends"},
	{"pr56836", []string{"--p2p-pending-handshake=wait", "--sim-lookup-deadline=progress", "--sim-lookup-timeout=30s"},
		"today + PR #56836: a lookup unanswered for 30 s marks the peer's session dead"},
}

// ArmArgs are the flags of the arm named name, a copy the caller may
// append to; ok is false for a name that is no arm.
func ArmArgs(name string) (args []string, ok bool) {
	for _, a := range Arms {
		if a.Name == name {
			return slices.Clone(a.Args), true
		}
	}
	return nil, false
}

// ArmNames lists the arms' names: "main, fixed, today, pr56836".
func ArmNames() string {
	names := make([]string, len(Arms))
	for i, a := range Arms {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}
