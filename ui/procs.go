package ui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"p2pfault/event"
)

// procTable lists every engine process.
type procTable struct {
	engines []*engineState
	metrics map[string]event.MetricsInfo // latest /metrics per engine (metrics.go); none: no columns
	links   map[string]event.LinkCounts  // each source's link counts (link.go); none: no column
	styles  *Styles
	// most is the most engine lines it lists (0: every engine); with more
	// engines the last line sums up those not listed (scale.go).
	most int
}

func (t procTable) Render(w, h int) string {
	s := t.styles
	if h <= 0 {
		return ""
	}
	var hidden []*engineState
	if t.most > 0 {
		t.engines, hidden = procShown(t.engines, t.most)
	}
	rows := t.rows()
	widths := columnWidths(rows, w, giveWay(rows[0]))
	var lines []string
	for ri, r := range rows {
		var b strings.Builder
		first := true
		for c, cell := range r {
			if widths[c] == 0 {
				continue // given way (columnWidths)
			}
			cell = fit(cell, widths[c])
			switch {
			case ri == 0:
				cell = s.Dim.Render(cell)
			case c == procStateColumn:
				cell = s.badge(t.engines[ri-1].badge()).Render(cell)
			}
			if !first {
				b.WriteString("  ")
			}
			first = false
			b.WriteString(cell)
		}
		lines = append(lines, b.String())
	}
	if len(t.engines) == 0 {
		lines = append(lines, s.Dim.Render("no engine has reported yet"))
	}
	if len(hidden) > 0 {
		lines = append(lines, s.Dim.Render(fit(procHidden(hidden), w)))
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	return block(lines, w, h)
}

// The process table's columns that a cell's place says something of.
const (
	procRoleColumn     = 1 // ROLE: the engine's name says it (source-N, decoder)
	procPidColumn      = 2 // PID: the one-line table and sessions.json say it too
	procSidColumn      = 3 // SID: the PID again for an engine leading its own session
	procMembersColumn  = 4 // MEMBERS: can grow without bound, gives way first
	procStateColumn    = 5 // STATE: in the state's badge colours
	procPortsColumn    = 6 // HTTP/P2P: fixed for the run
	procUptimeColumn   = 7
	procRestartsColumn = 8
)

// procGiveWay are the columns dropped whole, in this order, while the
// table is still wider than the screen once MEMBERS is narrowed: those
// that say least of the run as it goes first, so the live figures at the
// right (RUN, WAIT, the lookup delay a busy source drives) stay on it.
// PID goes last, only when STATE is wider than its usual words (one
// rank's core stopped: "rank1 stopped"), which say more of the run.
var procGiveWay = []int{procSidColumn, procMembersColumn, procUptimeColumn, procPortsColumn, procRestartsColumn, procRoleColumn, procPidColumn}

// rows are the table's head and a row per engine, unstyled.
func (t procTable) rows() [][]string {
	head := []string{"ENGINE", "ROLE", "PID", "SID", "MEMBERS", "STATE", "HTTP/P2P", "UPTIME", "RESTARTS"}
	// Attached engines (run --attach) add what p2pfault knows of the ones
	// it cannot see in /proc: their URL and what /health said.
	attached := false
	for _, e := range t.engines {
		attached = attached || e.info.URL != ""
	}
	if attached {
		head = append(head, "URL", "/HEALTH")
	}
	scraped := len(t.metrics) > 0
	if scraped {
		head = append(head, metricsHead...)
	}
	lookup := exportsLookup(t.metrics)
	if lookup {
		head = append(head, lookupHead)
	}
	linked := len(t.links) > 0
	if linked {
		head = append(head, linkHead)
	}
	rows := [][]string{head}
	for _, e := range t.engines {
		i := e.info
		state := e.stateText()
		row := []string{
			i.Name, orDash(string(i.Role)), pidOrDash(i.Pid), pidOrDash(i.Sid), orDash(fmtPids(i.Members)), orDash(state),
			fmt.Sprintf("%d/%d", i.HTTPPort, i.P2PPort), fmtUptime(i.Uptime), strconv.Itoa(i.Restarts),
		}
		if attached {
			row = append(row, orDash(i.URL), orDash(i.Health))
		}
		if scraped {
			m, ok := t.metrics[i.Name]
			row = append(row, metricsCells(m, ok)...)
			if lookup {
				row = append(row, lookupCell(m, ok))
			}
		}
		if linked {
			c, ok := t.links[i.Name]
			row = append(row, linkCell(c, ok))
		}
		rows = append(rows, row)
	}
	return rows
}

// giveWay are the columns dropped whole, in order, for a table of head:
// procGiveWay, then with a LINK column the decoder's hit rate and read
// rate (a source's are 0: it serves, it does not pull), so on 80 columns
// a link's counts stay beside RUN, WAIT and the lookup delay.
func giveWay(head []string) []int {
	if !slices.Contains(head, linkHead) {
		return procGiveWay
	}
	out := slices.Clone(procGiveWay)
	for _, name := range metricsHead[2:] { // EXT HIT 10s, P2P READ
		if c := slices.Index(head, name); c >= 0 {
			out = append(out, c)
		}
	}
	return out
}

// columnWidths are the widest cell of each column, MEMBERS narrowed so the
// table fits w when it can, then the give-way columns dropped (width 0)
// one by one while it does not.
func columnWidths(rows [][]string, w int, giveWay []int) []int {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for c, cell := range r {
			widths[c] = max(widths[c], textWidth(cell))
		}
	}
	total := 2 * (len(widths) - 1)
	for _, cw := range widths {
		total += cw
	}
	over := total - w
	if over <= 0 {
		return widths
	}
	narrowed := max(len("MEMBERS"), widths[procMembersColumn]-over)
	over -= widths[procMembersColumn] - narrowed
	widths[procMembersColumn] = narrowed
	for _, c := range giveWay {
		if over <= 0 {
			break
		}
		over -= widths[c] + 2 // the column and its separator
		widths[c] = 0
	}
	return widths
}

func pidOrDash(p int) string {
	if p <= 0 {
		return "-"
	}
	return strconv.Itoa(p)
}

// faulted is a decoder's condition while a fault is in force on it: the
// fault's words (STALLED, KILLED, CUT OFF) say more than its processes'
// state, and a partitioned decoder's processes run on.
func (e *engineState) faulted() *event.ConditionInfo {
	if e.cond == nil || e.cond.Fault == "" || e.cond.Condition == event.CondUp {
		return nil
	}
	return e.cond
}

// stateText is the STATE cell: the fault in force on a decoder, else the
// processes' state.
func (e *engineState) stateText() string {
	if c := e.faulted(); c != nil {
		return c.Label
	}
	i := e.info
	state := i.StateText()
	if i.Exit != "" && i.State == event.StateExited {
		state += " (" + i.Exit + ")"
	}
	return state
}

// badge is the STATE cell's colours, as stateText chose its words.
func (e *engineState) badge() badgeKind {
	if c := e.faulted(); c != nil {
		return conditionBadge(*c)
	}
	return engineBadge(e.info)
}

// engineBadge maps an engine's process state to the badge colours: one
// rank's core stopped is a stall's colour too, its words (StateText) say
// whose.
func engineBadge(in event.EngineInfo) badgeKind {
	if len(in.StoppedRanks) > 0 {
		return badgeStalled
	}
	switch in.State {
	case event.StateReady:
		return badgeReady
	case event.StateStopped:
		return badgeStalled
	case event.StateExited:
		return badgeKilled
	case event.StateRestarting:
		return badgeRestarting
	case event.StateRemoved:
		return badgeRemoved
	default:
		return badgeStarting
	}
}

// procLine is the process table in one line, when space is short.
func procLine(engines []*engineState, s *Styles, w int) string {
	if len(engines) == 0 {
		return fit(s.Dim.Render("no engine has reported yet"), w)
	}
	var parts []string
	for _, e := range engines {
		i := e.info
		parts = append(parts, i.Name+" "+s.badge(e.badge()).Render(e.stateText())+" "+s.Dim.Render(pidOrDash(i.Pid)))
	}
	return fit(strings.Join(parts, " · "), w)
}
