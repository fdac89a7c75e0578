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

// The decoder picker: the fault keys act on a decoder instead of the
// selected source (issue #41), as the timeline's `stall decoder-1` does.

// decoders is how many decoders the run has, as it says (1 before it
// says).
func (m Model) decoders() int {
	if m.st.run == nil {
		return 1
	}
	return max(m.st.run.Decoders, 1)
}

// nextDecoder moves the picker on: decoder-0, decoder-1, ..., then the
// selected source again. It leaves the rank picker's choice behind: a
// decoder has no ranks.
func (m Model) nextDecoder() Model {
	m.decoder++
	if m.decoder >= m.decoders() {
		m.decoder = -1
	}
	m.rank = -1
	return m
}

// targetName is what the fault keys act on, as the header names it:
// "source-0", "source-0/rank1", "decoder-1".
func (m Model) targetName() string {
	if m.decoder >= 0 {
		return fault.DecoderTarget(m.decoder)
	}
	return event.TargetName(m.selected, m.rank)
}

// action is kind k on what the keys target: the selected source, the
// rank the picker chose of it, or the decoder the decoder picker chose.
func (m Model) action(k *fault.Kind) fault.Action {
	if m.decoder >= 0 {
		return fault.Action{Kind: k, Source: m.decoder, Grain: fault.Grain{Decoder: true}}
	}
	a := fault.Action{Kind: k, Source: m.selected}
	if m.rank >= 0 && m.rank < m.ranksOf(m.selected) {
		a.Grain = fault.OneRank(m.rank)
	}
	return a
}
