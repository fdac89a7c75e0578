package ui

import (
	"strings"
	"time"

	"p2pfault/event"
)

// badgeKind is a source's state as the badge shows it.
type badgeKind int

const (
	badgeUnknown badgeKind = iota
	badgeStarting
	badgeReady
	badgeStalled
	badgeKilled
	badgeRestarting
	badgeRemoved
	badgeExited
	badgeNetwork // partitioned or lossy until healed
)

// badge is source i's badge: the label of the condition the experiment
// sent (a stall's counting down to its end), in its condition's colours.
func (st *state) badge(i int, nowT time.Duration) (badgeKind, string) {
	if i < 0 || i >= len(st.sources) || st.sources[i].cond == nil {
		return badgeUnknown, "WAITING"
	}
	c := st.sources[i].cond
	text := c.Label
	if c.Condition == event.CondStalled && c.Until > 0 {
		text += " " + fmtCountdown(c.Until-nowT)
	}
	return conditionBadge(*c), text
}

// faultedRank is the rank of source i a fault in force acts on alone, as
// the condition's Target names it ("rank1" of "source-0/rank1"); "" when
// none does.
func (st *state) faultedRank(i int) string {
	if i < 0 || i >= len(st.sources) || st.sources[i].cond == nil {
		return ""
	}
	_, rank, ok := strings.Cut(st.sources[i].cond.Target, "/")
	if !ok {
		return ""
	}
	return rank
}

// conditionBadge is the colours of a condition.
func conditionBadge(c event.ConditionInfo) badgeKind {
	switch c.Condition {
	case event.CondUp:
		return badgeReady
	case event.CondStalled:
		return badgeStalled
	case event.CondNetwork:
		return badgeNetwork
	case event.CondRestarting:
		if c.Down {
			return badgeKilled
		}
		return badgeRestarting
	case event.CondRemoved:
		return badgeRemoved
	case event.CondExited, event.CondUnreachable:
		return badgeExited
	case event.CondStarting:
		return badgeStarting
	}
	if c.Fault != "" {
		// A kind's condition of its own (busy): a fault in force.
		return badgeStalled
	}
	return badgeUnknown
}
