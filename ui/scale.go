package ui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// The dashboard at scale: a cluster of tens of sources and several
// decoders (--sources 64 --decoders 8) gives neither a panel nor a process
// row to every engine on a 160×48 terminal, or the table alone fills the
// screen and no latency, check or event line is left. So the process
// table lists at most procRowsMax engines, those with something to say
// first, and sums up the rest in a line; and the source panels are paged,
// the page holding the selected source (tab and shift+tab move it), the
// sources off the page summed up in a line.

// procRowsMax is the most engine rows the process table takes of avail
// lines: a sixth, but never fewer than three (a cluster of two sources
// and a decoder keeps its whole table).
func procRowsMax(avail int) int { return max(3, avail/6) }

// procShown are the engines a table of rows engine lines lists when there
// are more than rows: rows-1 of them, those not ready first (a stalled,
// restarting or exited engine is what the table is read for), then the
// decoders (few, and every pull goes through one), in the table's order,
// and the line left sums up the others (procHidden).
func procShown(engines []*engineState, rows int) (shown, hidden []*engineState) {
	if len(engines) <= rows {
		return engines, nil
	}
	keep := make([]bool, len(engines))
	left := max(rows-1, 0)
	for _, pass := range []func(*engineState) bool{
		func(e *engineState) bool { return e.badge() != badgeReady },
		func(e *engineState) bool { return e.info.Role == event.RoleDecoder },
		func(*engineState) bool { return true },
	} {
		for i, e := range engines {
			if left > 0 && !keep[i] && pass(e) {
				keep[i], left = true, left-1
			}
		}
	}
	for i, e := range engines {
		if keep[i] {
			shown = append(shown, e)
		} else {
			hidden = append(hidden, e)
		}
	}
	return shown, hidden
}

// procHidden sums up the engines the table does not list: "… 63 more
// engines: 62 ready, 1 stopped".
func procHidden(hidden []*engineState) string {
	states := map[string]int{}
	for _, e := range hidden {
		states[e.info.StateText()]++
	}
	return fmt.Sprintf("… %d more engines: %s", len(hidden), countsText(states))
}

// countsText is "62 ready, 1 stopped": each word's count, the commonest
// first, then by word.
func countsText(counts map[string]int) string {
	words := slices.Collect(maps.Keys(counts))
	slices.SortFunc(words, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = fmt.Sprintf("%d %s", counts[w], strings.ToLower(w))
	}
	return strings.Join(parts, ", ")
}

// pageSources fits l's grid of source panels into rest lines: when every
// row of panels cannot have panelMin lines beside the event log's
// logMin, the grid keeps the rows that can and pages the sources (one
// line of rest goes to the summary of those not shown). It returns the
// lines left.
func (l *dashLayout) pageSources(rest int) int {
	fit := max(1, (rest-logMin-1)/panelMin)
	if l.rows <= fit {
		return rest
	}
	l.rows, l.paged = fit, true
	return rest - 1
}

// pageFirst is the first source of the page that holds the selected one.
func (m Model) pageFirst(l dashLayout) int {
	if !l.paged {
		return 0
	}
	per := l.cols * l.rows
	return m.selected / per * per
}

// pageSummary is the line under a page of source panels: which sources
// are on it, and the others' badges and pulls summed up.
func (m Model) pageSummary(l dashLayout, w int, nowT time.Duration) string {
	first, n := m.pageFirst(l), len(m.st.sources)
	last := min(first+l.cols*l.rows, n) - 1
	badges := map[string]int{}
	var pulls, pulled int64
	for i, src := range m.st.sources {
		if i >= first && i <= last {
			continue
		}
		_, text := m.st.badge(i, nowT)
		badges[text]++
		pulls, pulled = pulls+src.n, pulled+src.pulled
	}
	line := fmt.Sprintf("sources %d-%d of %d shown (tab, shift+tab: the page follows the selection) · the other %d: %s · %d pulls",
		first, last, n, n-(last-first+1), countsText(badges), pulls)
	if pulls > 0 {
		line += fmt.Sprintf(", %.1f%% hit", 100*float64(pulled)/float64(pulls))
	}
	return fit(m.styles.Dim.Render(line), w)
}
