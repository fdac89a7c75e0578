package experiment

import (
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
)

// TestConditionFollowsFaultsAndEngineStates: a source's condition comes
// from the fault in force and its engine's process state together, as the
// badge shows it and the refusals read it.
func TestConditionFollowsFaultsAndEngineStates(t *testing.T) {
	kind := func(name string) *fault.Kind {
		k, ok := fault.Lookup(name)
		if !ok {
			t.Fatalf("no kind %s", name)
		}
		return k
	}
	eng := func(st event.State, pid int) event.EngineInfo {
		return event.EngineInfo{Name: "source-0", Role: event.RoleSource, State: st, Pid: pid}
	}
	exited := eng(event.StateExited, 0)
	exited.Exit = "code 1"
	// One rank's core stopped: the engine ready, its rank 1 stopped, as
	// the runner reads it from /proc.
	rankStopped := eng(event.StateReady, 4200)
	rankStopped.StoppedRanks = []int{1}
	twoStopped := eng(event.StateReady, 4200)
	twoStopped.StoppedRanks = []int{0, 2}
	restarted := eng(event.StateStarting, 5000)
	restarted.Restarts = 1
	tests := []struct {
		name  string
		f     inForce
		eng   event.EngineInfo
		cond  event.Condition
		label string
		down  bool
		// target: the rank the badge names ("" the whole source).
		target string
	}{
		{name: "ready", eng: eng(event.StateReady, 4200), cond: event.CondUp, label: "READY"},
		{name: "starting", eng: eng(event.StateStarting, 4200), cond: event.CondStarting, label: "STARTING"},
		{name: "not seen yet", cond: event.CondStarting, label: "WAITING"},
		{name: "stalled, counting to its end", f: inForce{cond: event.CondStalled, kind: kind(fault.ActionStall), until: 40 * time.Second},
			eng: eng(event.StateStopped, 4200), cond: event.CondStalled, label: "STALLED"},
		{name: "stopped by someone else", eng: eng(event.StateStopped, 4200), cond: event.CondStalled, label: "STALLED"},
		{name: "kill before the restart begins", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionKill), pid: 4200},
			eng: eng(event.StateReady, 4200), cond: event.CondRestarting, label: "KILLED", down: true},
		{name: "killed process exited", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionKill), pid: 4200},
			eng: exited, cond: event.CondRestarting, label: "KILLED", down: true},
		{name: "killed, then restarting", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionKill), pid: 4200},
			eng: eng(event.StateRestarting, 0), cond: event.CondRestarting, label: "RESTARTING"},
		{name: "killed, then starting again", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionKill), pid: 4200},
			eng: restarted, cond: event.CondRestarting, label: "RESTARTING"},
		// Until the kill's restart reports ready, the source is still on
		// its way back, though its new process answers.
		{name: "a new process after kill, before the restart is done", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionKill), pid: 4200},
			eng: eng(event.StateReady, 5000), cond: event.CondRestarting, label: "RESTARTING"},
		{name: "removed", f: inForce{cond: event.CondRemoved, kind: kind(fault.ActionRemove)}, eng: eng(event.StateReady, 4200),
			cond: event.CondRemoved, label: "REMOVED"},
		{name: "removed, as the runner says", eng: eng(event.StateRemoved, 0), cond: event.CondRemoved, label: "REMOVED"},
		{name: "restore through restarting", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionRestore)},
			eng: eng(event.StateRemoved, 0), cond: event.CondRemoved, label: "REMOVED"},
		{name: "restore, engine starting", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionRestore)},
			eng: restarted, cond: event.CondRestarting, label: "RESTARTING"},
		{name: "partitioned", f: inForce{cond: event.CondNetwork, kind: kind(fault.ActionPartition)}, eng: eng(event.StateReady, 4200),
			cond: event.CondNetwork, label: "PARTITIONED"},
		{name: "lossy", f: inForce{cond: event.CondNetwork, kind: kind(fault.ActionLoss)}, eng: eng(event.StateReady, 4200),
			cond: event.CondNetwork, label: "LOSSY"},
		{name: "a crash is not a kill", eng: exited, cond: event.CondExited, label: "EXITED code 1", down: true},
		{name: "a crash during a stall", f: inForce{cond: event.CondStalled, kind: kind(fault.ActionStall)}, eng: exited,
			cond: event.CondExited, label: "EXITED code 1", down: true},
		// A stall of one rank is that rank's; a crash after it is the engine's.
		{name: "one rank stalled", f: inForce{cond: event.CondStalled, kind: kind(fault.ActionStall), target: "source-0/rank1"},
			eng: rankStopped, cond: event.CondStalled, label: "STALLED", target: "source-0/rank1"},
		{name: "one rank's core stopped by someone else", eng: rankStopped, cond: event.CondStalled, label: "STALLED", target: "source-0/rank1"},
		{name: "two ranks' cores stopped by someone else", eng: twoStopped, cond: event.CondStalled, label: "STALLED"},
		{name: "one rank partitioned", f: inForce{cond: event.CondNetwork, kind: kind(fault.ActionPartition), target: "source-0/rank1"},
			eng: eng(event.StateReady, 4200), cond: event.CondNetwork, label: "PARTITIONED", target: "source-0/rank1"},
		{name: "a crash during one rank's stall", f: inForce{cond: event.CondStalled, kind: kind(fault.ActionStall), target: "source-0/rank1"},
			eng: exited, cond: event.CondExited, label: "EXITED code 1", down: true},
		// A kill of one rank ends the whole engine (RankEngine): not the rank's.
		{name: "one rank killed", f: inForce{cond: event.CondRestarting, kind: kind(fault.ActionKill), pid: 4200, target: "source-0/rank1"},
			eng: eng(event.StateReady, 4200), cond: event.CondRestarting, label: "KILLED", down: true},
		{name: "an attached engine that does not answer", eng: eng(event.StateUnreachable, 0), cond: event.CondUnreachable, label: "UNREACHABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := condition(0, tt.f, tt.eng)
			if c.Condition != tt.cond || c.Label != tt.label || c.Down != tt.down || c.Target != tt.target {
				t.Errorf("condition = %+v, want %s %q down=%v target %q", c, tt.cond, tt.label, tt.down, tt.target)
			}
			if want := tt.f.kind; want != nil && c.Fault != want.Name {
				t.Errorf("fault = %q, want %s", c.Fault, want.Name)
			}
			if tt.f.until > 0 && c.Until != tt.f.until {
				t.Errorf("until = %v, want %v", c.Until, tt.f.until)
			}
		})
	}
}
