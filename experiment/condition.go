package experiment

import (
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
)

// inForce is the fault a kind left a source in (fault.Env.SetCondition).
type inForce struct {
	cond   event.Condition
	kind   *fault.Kind
	until  time.Duration // a timed fault's end, since t0; 0 untimed
	target string        // one rank's name when the kind acts on it alone ("" the source)
	pid    int           // the engine's pid when it was set: a restart is done from a new one
}

// condition is a source's condition: the one answer, from the fault in
// force (what a kind's action left it in) and its engine's process state
// (what /proc and /health show), to what the source is in now. The
// experiment sends it as condition events; the faces render it and every
// refusal reads it.
func condition(src int, f inForce, eng event.EngineInfo) event.ConditionInfo {
	c := event.ConditionInfo{Source: src}
	if f.kind != nil {
		c.Fault = f.kind.Name
	}
	label := func(def string) string {
		if f.kind != nil && f.kind.Badge != "" {
			return f.kind.Badge
		}
		return def
	}
	st := eng.State
	opens := f.kind != nil && f.kind.Opens
	// After a kill, "ready" counts only from a new process: the state read
	// just before the signal may still say ready.
	respawned := st == event.StateReady && eng.Pid != f.pid
	switch {
	case f.cond == event.CondRemoved:
		c.Condition, c.Label = event.CondRemoved, label("REMOVED")
	case st == event.StateRemoved:
		c.Condition, c.Label = event.CondRemoved, "REMOVED"
	case f.cond == event.CondStalled && st != event.StateExited && st != event.StateRestarting:
		c.Condition, c.Label, c.Until = event.CondStalled, label("STALLED"), f.until
	case st == event.StateStopped: // stopped by someone else
		c.Condition, c.Label = event.CondStalled, "STALLED"
	case len(eng.StoppedRanks) > 0: // ranks' cores stopped by someone else
		// One rank is named as a rank's fault names it: the engine goes on.
		c.Condition, c.Label = event.CondStalled, "STALLED"
		if len(eng.StoppedRanks) == 1 {
			c.Target = event.RankName(src, eng.StoppedRanks[0])
		}
	case f.cond == event.CondNetwork && st != event.StateExited && st != event.StateRestarting:
		c.Condition, c.Label = event.CondNetwork, label("CUT OFF")
	case st == event.StateRestarting:
		c.Condition, c.Label = event.CondRestarting, "RESTARTING"
	case f.cond == event.CondRestarting && opens && (st == event.StateStarting || respawned):
		c.Condition, c.Label = event.CondRestarting, "RESTARTING"
	case f.cond == event.CondRestarting && opens:
		c.Condition, c.Label, c.Down = event.CondRestarting, label("KILLED"), true
	case f.cond == event.CondRestarting:
		c.Condition, c.Label = event.CondRestarting, label("RESTARTING")
	case st == event.StateExited:
		c.Condition, c.Label, c.Down = event.CondExited, "EXITED", true
		if eng.Exit != "" {
			c.Label += " " + eng.Exit
		}
	case f.cond != "" && f.cond != event.CondUp && f.cond != event.CondStalled && f.cond != event.CondNetwork:
		// A kind's condition of its own (a kind registered later).
		c.Condition, c.Label = f.cond, label(strings.ToUpper(string(f.cond)))
	case st == event.StateStarting && eng.Restarts > 0:
		c.Condition, c.Label = event.CondRestarting, "RESTARTING"
	case st == event.StateStarting:
		c.Condition, c.Label = event.CondStarting, "STARTING"
	case st == event.StateReady:
		c.Condition, c.Label = event.CondUp, "READY"
	case st == event.StateUnreachable:
		c.Condition, c.Label = event.CondUnreachable, "UNREACHABLE"
	default:
		c.Condition, c.Label = event.CondStarting, "WAITING"
	}
	// The rank is named only while the source is in the condition the
	// rank's fault left it in: a crash or restart after it is the engine's.
	if f.kind != nil && f.kind.Ranks == fault.RankAlone && f.cond == c.Condition {
		c.Target = f.target
	}
	return c
}

// observe computes source src's condition from eng (its engine's state,
// just read) and the fault in force, and sends it when it changed. It
// returns the condition.
//
// It is computed under the bus's lock (emitIf): conditions are sent in
// the order they are computed, so the last one sent is the latest.
func (e *Experiment) observe(src int, eng event.EngineInfo) event.ConditionInfo {
	var c event.ConditionInfo
	e.emitIf(func() (event.Event, bool) {
		var changed bool
		c, changed = e.faults.observe(src, eng)
		return event.Event{Kind: event.KindCondition, Condition: &c}, changed
	})
	return c
}

// observe computes source src's condition and records it as sent; changed
// says whether it differs from the last one.
func (fs *faults) observe(src int, eng event.EngineInfo) (c event.ConditionInfo, changed bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	c = condition(src, fs.inForce[src], eng)
	last, seen := fs.conds[src]
	fs.conds[src] = c
	return c, !seen || last != c
}

// conditionNow is source i's condition as its engine is now; ok is false
// when the cluster has no source i (yet).
func (e *Experiment) conditionNow(i int) (event.ConditionInfo, bool) {
	t, err := e.source(i)
	if err != nil {
		return event.ConditionInfo{}, false
	}
	return e.observe(i, t.State()), true
}

// refuse says why kind k cannot be fired on source i now ("" if it can):
// fault's one rule (Kind.Refusal) over the source's condition, read now,
// in the words the dashboard's keys show.
func (e *Experiment) refuse(i int, k *fault.Kind) string {
	c, ok := e.conditionNow(i)
	if !ok {
		return "" // the caller says there is no such source
	}
	return k.Refusal(keyName(i), c.Condition)
}

// inForceOn is the fault in force on src, if any.
func (fs *faults) inForceOn(src int) (inForce, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fi, ok := fs.inForce[src]
	return fi, ok
}
