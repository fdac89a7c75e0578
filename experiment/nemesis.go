package experiment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
)

// nemesisSchedule draws the run's schedule (Config.Nemesis) for a cluster
// of sources sources and decoders decoders (drawn too when several), at
// real time: faults from FaultAt on, each with its recovery window inside
// Duration. A nemesis needs a Duration, sources that the cluster has, and
// room for one fault at least.
func (c Config) nemesisSchedule(sources, decoders int) (fault.Timeline, error) {
	n := *c.Nemesis
	n.Decoders = decoders
	if c.Duration <= 0 {
		return nil, exitcode.Usagef("a nemesis needs the run's duration (how long to soak)")
	}
	for _, s := range n.Sources {
		if s < 0 || s >= sources {
			return nil, exitcode.Usagef("nemesis sources: %s is not in the cluster (sources 0-%d)", event.SourceName(s), sources-1)
		}
	}
	tl := n.Schedule(c.FaultAt, c.Duration, c.Recovery, sources)
	if len(tl) == 0 {
		return nil, exitcode.Usagef("no nemesis fault fits in the run: from %v on, a fault of up to %v and the %v recovery window after it must end by the duration, %v",
			c.FaultAt, max(n.Length+n.LengthSpread, n.Settle), c.Recovery, c.Duration)
	}
	return tl, nil
}

// scheduleInfo is the schedule event's payload: the played (scaled)
// steps, the timeline at real time, and for a nemesis how it drew them.
func (e *Experiment) scheduleInfo() event.ScheduleInfo {
	si := event.ScheduleInfo{Timeline: e.cfg.Timeline}
	for _, s := range e.timeline {
		si.Steps = append(si.Steps, event.ScheduledFault{At: s.At, Action: s.Kind.Name, Arg: s.Arg, Source: s.Source, Target: rankName(s.Action), For: s.For})
	}
	if n := e.cfg.Nemesis; n != nil {
		si.Nemesis, si.Seed = fault.NemesisRandom, n.Seed
		kinds := n.Kinds
		if len(kinds) == 0 {
			kinds = fault.DefaultDraws()
		}
		for _, k := range kinds {
			si.Kinds = append(si.Kinds, k.String())
		}
		si.Gap, si.GapSpread = n.Gap, n.GapSpread
		si.Length, si.LengthSpread, si.Settle = n.Length, n.LengthSpread, n.Settle
		si.Sources = n.Sources
		if len(si.Sources) == 0 {
			for i := range e.plan.Sources {
				si.Sources = append(si.Sources, i)
			}
		}
		si.AtOnce = max(n.AtOnce, 1)
	}
	return si
}

// awaitRoom holds a step until it may fire. A nemesis step waits until
// its source has no fault in force and fewer than AtOnce fault windows
// are open. The schedule plans this (a kill's window is planned as long
// as its restart), so it waits only when a restart ran long. A scripted
// step waits only for a timed fault on its source (`stall source-0 for
// 4s`) that its author planned to end before it (meantToEndBefore) and
// whose time has not long run out: it ends late only when its action
// started late (a loaded machine, an attach file's slow command). A fault
// the author overlapped the step with, or an untimed one, is the
// author's to resolve: the step is refused as a key would be. The wait
// is a warning, once.
func (e *Experiment) awaitRoom(ctx context.Context, s fault.Step) {
	const overdue = 5 * time.Second
	n := e.cfg.Nemesis
	atOnce := 0
	if n != nil {
		atOnce = max(n.AtOnce, 1)
	}
	who := "nemesis"
	if n == nil {
		who = "timeline"
		if !e.meantToEndBefore(s) {
			return
		}
	}
	room := func() (bool, string) {
		now := e.run.since()
		// A timed fault whose resume is long overdue has failed to end:
		// the step is refused as a key would be, rather than wait forever.
		if fi, busy := e.faults.inForceOn(s.Source); busy && (n != nil || fi.until > 0 && now < fi.until+overdue) {
			return false, "the fault in force on " + event.SourceName(s.Source)
		}
		if n == nil {
			return true, ""
		}
		var open []string
		for _, w := range e.verdicts.windowsNow() {
			if w.End == 0 {
				open = append(open, event.SourceName(w.Source))
			}
		}
		if len(open) >= atOnce {
			return false, fmt.Sprintf("the fault window on %s (at most %d at a time)", strings.Join(open, ", "), atOnce)
		}
		return true, ""
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	warned := false
	for {
		ok, why := room()
		if ok {
			return
		}
		if !warned {
			warned = true
			e.emit(event.Event{Kind: event.KindWarning, Message: fmt.Sprintf(
				"%s: %s waits for %s to end", who, s, why)})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// meantToEndBefore reports whether the timeline's last step on s's source
// before s's time was a timed one planned to end by then (its At plus its
// For): the author meant s to find the source free.
func (e *Experiment) meantToEndBefore(s fault.Step) bool {
	var prev fault.Step
	found := false
	for _, p := range e.timeline { // in time order
		if p.At >= s.At {
			break
		}
		if p.Source == s.Source {
			prev, found = p, true
		}
	}
	return found && prev.For > 0 && prev.At+prev.For <= s.At
}
