package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
)

// headerPanel is the top two lines: what runs, where it is, what comes next.
type headerPanel struct {
	run       *event.RunInfo
	phase     event.Phase
	nowT      time.Duration
	elapsed   time.Duration
	scale     float64
	probing   bool
	ended     bool
	target    string // what the fault keys act on (Model.targetName)
	nextFault string
	mark      string // a replay's mark and position, in place of the elapsed time (replay.go)
	styles    *Styles
}

func (h headerPanel) Render(width int) string {
	s := h.styles
	var what []string
	if h.run != nil {
		what = append(what,
			"case "+orDash(h.run.Case),
			"arm "+orDash(h.run.Arm))
		if m := event.ModeOf(h.run.Mode); m != event.ModeP2P {
			what = append(what, "mode "+m) // p2p, the seed's, goes unsaid
		}
		what = append(what,
			orDash(h.run.Engine),
			fmt.Sprintf("%d sources", h.run.Sources))
	}
	what = append(what, "scale ×"+strconv.FormatFloat(h.scale, 'g', 4, 64))
	phase := string(h.phase)
	if phase == "" {
		phase = "starting"
	}
	left := s.Title.Render("p2pfault") + "  " + strings.Join(what, " · ")
	line1 := spread(left, "phase "+s.Phase.Render(strings.ToUpper(phase)), width)

	parts := []string{
		"elapsed " + fmtClock(h.elapsed),
		fmtRunTime(h.nowT),
	}
	if h.mark != "" {
		parts[0] = h.mark
	}
	if h.nextFault != "" {
		parts = append(parts, s.Countdown.Render(h.nextFault))
	}
	probe := s.Ready.Render("probing")
	if !h.probing {
		probe = s.Stalled.Render("probing PAUSED")
	}
	if h.ended {
		probe = s.Dim.Render("run over")
	}
	parts = append(parts, probe)
	line2 := spread(strings.Join(parts, "  "), "target "+s.Selected.Render(h.target), width)
	return fit(line1, width) + "\n" + fit(line2, width)
}

// header is the header of the run shown (run: its RunInfo, or the
// several arms' merged one), ended when every arm shown has ended.
func (m Model) header(run *event.RunInfo, ended bool, now time.Time, w int) string {
	nowT := m.st.nowT(now)
	return headerPanel{
		run: run, phase: m.st.phase, nowT: nowT, elapsed: m.st.elapsed(now),
		scale: m.st.timeScale(), probing: m.st.probing, ended: ended,
		target: m.targetName(), nextFault: m.nextFault(nowT), mark: m.mark, styles: m.styles,
	}.Render(w)
}

// nextFault is the header's countdown to the next fault of the run's
// schedule (its schedule event: a timeline's steps, a case's preset, a
// nemesis' draws), or when the run ends once none is left.
func (m Model) nextFault(nowT time.Duration) string {
	run := m.st.run
	if run == nil || m.st.ended {
		return ""
	}
	scripted := len(m.st.schedule) > 0
	var what string
	var at time.Duration
	for _, f := range m.st.schedule {
		if f.At > nowT {
			what, at = fmt.Sprintf("%s %s", f.Action, f.TargetName()), f.At
			break
		}
	}
	beforeT0 := m.st.phase == "" || m.st.phase == event.PhaseStarting || m.st.phase == event.PhaseWarmup
	switch {
	case !scripted:
		if run.Duration > 0 && !beforeT0 {
			return "ends in " + fmtCountdown(run.Duration-nowT)
		}
		return "no scripted fault"
	case beforeT0:
		return fmt.Sprintf("%s at %s", what, fmtRunTime(at))
	case nowT < at:
		return fmt.Sprintf("%s in %s", what, fmtCountdown(at-nowT))
	case run.Duration > 0:
		return "ends in " + fmtCountdown(run.Duration-nowT)
	default:
		return ""
	}
}
