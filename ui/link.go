package ui

import (
	"fmt"

	"p2pfault/event"
)

// The run's links (--link) on the dashboard: each source's counts summed
// over its links (every rank, every decoder) in the process table's LINK
// column, and the link kinds' keys (m, A, x) in force only on a run that
// relays its pairs.

// linkHead is the process table's column of a source's link counts.
const linkHead = "LINK pass/held/drop/delay/hb"

// applyLinks keeps the links' latest counts, summed by source: each link
// event carries every link's counts since it started.
func (st *state) applyLinks(ev event.Event) {
	if len(ev.Links) == 0 {
		return
	}
	clear(st.links)
	for _, l := range ev.Links {
		if l.Source < 0 || l.Source >= maxSources {
			continue
		}
		name := event.SourceName(l.Source)
		sum := st.links[name]
		sum.Source = l.Source
		sum.Passed += l.Passed
		sum.Withheld += l.Withheld
		sum.Dropped += l.Dropped
		sum.Delayed += l.Delayed
		sum.Heartbeats += l.Heartbeats
		st.links[name] = sum
	}
}

// linkCell is a source's LINK cell, in linkHead's order: the control
// messages its links passed, withheld, dropped (a withheld one the
// fault's end discarded too) and delayed, and the heartbeats that flowed
// meanwhile (a muted source's still do: the half-open peer); "-" for an
// engine without a link. Figures between slashes, as HTTP/P2P, so on 80
// columns the cell shares the line with RUN, WAIT and the lookup delay.
func linkCell(c event.LinkCounts, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%d/%d/%d/%d/%d", c.Passed, c.Withheld, c.Dropped, c.Delayed, c.Heartbeats)
}

// withLink is the key map with the link kinds' keys in force on a run
// that relays its pairs (on), out of force (not matched, not in the help)
// on one that does not.
func (k KeyMap) withLink(on bool) KeyMap {
	faults := make([]FaultKey, len(k.Faults))
	for i, f := range k.Faults {
		if f.Kind.Link {
			f.SetEnabled(on)
		}
		faults[i] = f
	}
	k.Faults = faults
	return k
}
