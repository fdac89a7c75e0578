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
// of sources sources, at real time: faults from FaultAt on, each with its
// recovery window inside Duration. A nemesis needs a Duration, sources
// that the cluster has, and room for one fault at least.
func (c Config) nemesisSchedule(sources int) (fault.Timeline, error) {
	n := c.Nemesis
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

// awaitRoom holds a nemesis step until it may fire: its source has no
// fault in force and fewer than AtOnce fault windows are open. The
// schedule plans this (a kill's window is planned as long as its
// restart), so it waits only when a restart ran long; the wait is a
// warning, once. A scripted step never waits: its author chose its time.
func (e *Experiment) awaitRoom(ctx context.Context, s fault.Step) {
	n := e.cfg.Nemesis
	if n == nil {
		return
	}
	atOnce := max(n.AtOnce, 1)
	room := func() (bool, string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, busy := e.faults[s.Source]; busy {
			return false, "the fault in force on " + event.SourceName(s.Source)
		}
		var open []string
		for _, w := range e.windows {
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
				"nemesis: %s waits for %s to end", s, why)})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
