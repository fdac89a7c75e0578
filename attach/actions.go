package attach

import (
	"context"
	"errors"
	"slices"
	"strings"

	"p2pfault/fault"
)

// The actions of an attach file are fault kinds' names (package fault's
// registry) and fault.ActionReady: one vocabulary from the timeline to
// the file to the executors. In a run a kind reaches its executor through
// the fault.Target method its Act calls (a stall's Stop runs doStall), so
// nothing looks it up; a word (an attach file's key, Do's action) finds
// its executor in executors.

// executor is how a source takes one kind on a grain (the whole source,
// or one rank): a method of its faulter (local signals or the file's
// commands).
type executor func(faulter, context.Context, fault.Grain) (Result, error)

// executors are the kinds an attached source can take, each with the
// faulter method that takes it (the same for both ways of faulting; a
// local source cannot take a replace: Target.cannot says why).
var executors = map[string]executor{
	fault.ActionStall:   faulter.doStall,
	fault.ActionResume:  faulter.doResume,
	fault.ActionKill:    faulter.doKill,
	fault.ActionRemove:  faulter.doRemove,
	fault.ActionRestore: faulter.doRestore,
	fault.ActionReplace: faulter.doReplace,
}

// localReplace is why a local source cannot take a replace, in the words
// a run refuses it with: a local kill restarts the engine from its /proc
// command line, which names its ports in its own way (vllm's --port and
// the JSON of its --kv-transfer-config, a script's arguments, ...).
const localReplace = "a local source is restarted from its own command line, and p2pfault cannot know how to start it on other ports: " +
	"give the source commands (faults: {kill: [...], replace: [...]}) whose replace starts the new engine and prints its `HOST:PORT P2P_HOST:P2P_PORT`"

// What an executor says when it has nothing to undo: a run refuses such
// an action before it reaches the target (the experiment asks the kind's
// rule), but a stall's resume may race with Close's.
var (
	errNotStalled = errors.New("it is not stalled")
	errNotRemoved = errors.New("it is not removed")
)

// Kinds are the fault kinds an attached source can take, in the
// registry's order: those with an executor.
func Kinds() []string {
	var out []string
	for _, k := range fault.Kinds() {
		if _, ok := executors[k.Name]; ok {
			out = append(out, k.Name)
		}
	}
	return out
}

// localKinds are the kinds a local source takes, sorted, for messages.
func localKinds() string {
	var out []string
	for _, k := range Kinds() {
		if k != fault.ActionReplace {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// Actions are the keys a `faults` map may have: Kinds, then
// fault.ActionReady (the command that waits for the source to be back).
func Actions() []string { return append(Kinds(), fault.ActionReady) }

func isAction(a string) bool { return slices.Contains(Actions(), a) }

func actionList() string { return strings.Join(Actions(), ", ") }
