package attach

import (
	"context"
	"slices"
	"strings"

	"p2pfault/fault"
)

// The actions of an attach file are fault kinds' names (package fault's
// registry) and fault.ActionReady: one vocabulary from the timeline to
// the file to the executors, which are looked up by the kind's name.

// commandActs is how a source faulted through the file's commands takes
// each kind: its command, with what p2pfault keeps around it (the guard
// of a stall). A kind here may be a key of a `faults` map.
var commandActs = map[string]func(*commandFaulter, context.Context) (Result, error){
	fault.ActionStall:   (*commandFaulter).doStall,
	fault.ActionResume:  (*commandFaulter).doResume,
	fault.ActionKill:    (*commandFaulter).doKill,
	fault.ActionRemove:  (*commandFaulter).doRemove,
	fault.ActionRestore: (*commandFaulter).doRestore,
	fault.ActionReplace: (*commandFaulter).doReplace,
}

// localActs is how a source faulted locally takes each kind: signals to
// its session, a restart from its /proc command line.
var localActs = map[string]func(*localFaulter, context.Context) (Result, error){
	fault.ActionStall:   (*localFaulter).doStall,
	fault.ActionResume:  (*localFaulter).doResume,
	fault.ActionKill:    (*localFaulter).doKill,
	fault.ActionRemove:  (*localFaulter).doRemove,
	fault.ActionRestore: (*localFaulter).doRestore,
}

// localRefusals are the kinds of commandActs a source faulted locally
// cannot take, and why, in the words a run refuses them with.
var localRefusals = map[string]string{
	// A local kill restarts the engine from its /proc command line, which
	// names its ports in its own way (vllm's --port and the JSON of its
	// --kv-transfer-config, a script's arguments, ...).
	fault.ActionReplace: "a local source is restarted from its own command line, and p2pfault cannot know how to start it on other ports: " +
		"give the source commands (faults: {kill: [...], replace: [...]}) whose replace starts the new engine and prints its `HOST:PORT P2P_HOST:P2P_PORT`",
}

// Kinds are the fault kinds an attached source can take, in the
// registry's order: those the command executor knows.
func Kinds() []string {
	var out []string
	for _, k := range fault.Kinds() {
		if _, ok := commandActs[k.Name]; ok {
			out = append(out, k.Name)
		}
	}
	return out
}

// Actions are the keys a `faults` map may have: Kinds, then
// fault.ActionReady (the command that waits for the source to be back).
func Actions() []string { return append(Kinds(), fault.ActionReady) }

func isAction(a string) bool { return slices.Contains(Actions(), a) }

func actionList() string { return strings.Join(Actions(), ", ") }
