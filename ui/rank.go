package ui

import (
	"p2pfault/event"
	"p2pfault/fault"
)

// The rank picker: on a source of several data-parallel ranks (--source-dp)
// the fault keys act on the whole engine or on one rank's engine core
// (source-0/rank1), as the timeline's two grains do.

// ranksOf is how many data-parallel ranks source i has, as the run says.
func (m Model) ranksOf(i int) int {
	if m.st.run == nil {
		return 1
	}
	return event.RanksOf(m.st.run.SourceRanks, i)
}

// nextRank moves the picker on: the whole engine, rank 0, rank 1, ...,
// the whole engine again; on a source of one rank it says so.
func (m Model) nextRank(keyName string) Model {
	n := m.ranksOf(m.selected)
	if n <= 1 {
		m.st.addLog(m.nowT(), levelWarn, "%s: %s has one engine core (no data-parallel ranks: run with --source-dp N)",
			keyName, event.SourceName(m.selected))
		m.rank = -1
		return m
	}
	m.rank++
	if m.rank >= n {
		m.rank = -1
	}
	return m
}

// action is kind k on what the keys target: the selected source, or the
// rank the picker chose of it.
func (m Model) action(k *fault.Kind) fault.Action {
	a := fault.Action{Kind: k, Source: m.selected}
	if m.rank >= 0 && m.rank < m.ranksOf(m.selected) {
		a.Grain = fault.OneRank(m.rank)
	}
	return a
}
