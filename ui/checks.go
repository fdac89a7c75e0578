package ui

import (
	"fmt"
	"strings"

	"p2pfault/check"
	"p2pfault/event"
)

// checksPanel shows each check's live verdict; one line when space is short.
type checksPanel struct {
	verdict *event.Verdict
	// lookup is the latest fault window's decoder lookup delay beside the
	// baseline (lookupWindowText), a line under the checks; "" for none.
	lookup string
	styles *Styles
}

func checkMark(s *Styles, r event.Result) string {
	switch {
	case r.Empty:
		return s.Dim.Render("·")
	case r.Passed:
		return s.Pass.Render("✓")
	default:
		return s.Fail.Render("✗")
	}
}

func (c checksPanel) Render(w, h int) string {
	s := c.styles
	if h <= 0 {
		return ""
	}
	if c.verdict == nil {
		return block([]string{s.Section.Render("checks") + " " + s.Dim.Render("no verdict yet")}, w, h)
	}
	if h == 1 {
		var b strings.Builder
		b.WriteString(s.Section.Render("checks (live)") + timesSuffix(s, c.verdict))
		for _, r := range c.verdict.Checks {
			b.WriteString("  " + checkMark(s, r) + " " + r.Name)
		}
		return block([]string{b.String()}, w, h)
	}
	lines := []string{s.Section.Render("checks (live)") + timesSuffix(s, c.verdict)}
	nameW := 0
	for _, r := range c.verdict.Checks {
		nameW = max(nameW, len(r.Name))
	}
	for _, r := range c.verdict.Checks {
		lines = append(lines, checkMark(s, r)+" "+fit(r.Name, nameW)+"  "+s.Dim.Render(r.Detail))
	}
	if c.lookup != "" {
		lines = append(lines, s.Dim.Render("·")+" "+fit("decoder", nameW)+"  "+c.lookup)
	}
	return block(lines, w, h)
}

// verdictTable is the end of a scripted run: each check and the figures of
// the seed's table.
type verdictTable struct {
	verdict *event.Verdict
	run     *event.RunInfo
	styles  *Styles
	// cut: the run was cut short (state.cutShort); its verdict reads
	// INTERRUPTED unless a bound had broken (check.Broken).
	cut bool
}

// Height is how many lines the table wants.
func (v verdictTable) Height() int {
	h := 1 + len(v.verdict.Checks)
	if v.faulted() {
		h += 3
	}
	if v.verdict.Times != nil {
		h++
	}
	if n := len(v.verdict.Steady); n > 0 {
		h += 2 + n // title, header, a line per source
	}
	return h
}

// faulted says the verdict judged a fault window: it has the seed's
// figures (faulted, healthy, recovery) to show.
func (v verdictTable) faulted() bool {
	return v.verdict.Times != nil || v.verdict.Summary != (event.Summary{})
}

// timesSuffix is the live checks' title's detect and recover times.
func timesSuffix(s *Styles, v *event.Verdict) string {
	if v == nil || v.Times == nil {
		return ""
	}
	return "  " + s.Dim.Render(timesLine(v.Times))
}

func (v verdictTable) Render(w, h int) string {
	s := v.styles
	res := s.Pass.Render("PASS")
	switch {
	case v.cut && !check.Broken(*v.verdict):
		res = s.Dim.Render("INTERRUPTED")
	case !v.verdict.Passed && !v.verdict.Failed():
		res = s.Dim.Render("NOT JUDGED")
	case !v.verdict.Passed:
		res = s.Fail.Render("FAIL")
	}
	title := s.Section.Render("verdict") + " " + res
	if v.run != nil {
		title += s.Dim.Render(" · arm " + orDash(v.run.Arm) + " · case " + orDash(v.run.Case))
	}
	lines := []string{title}
	for _, n := range v.verdict.NotJudged {
		lines = append(lines, "  "+s.Dim.Render("not judged: "+n))
	}
	nameW := 0
	for _, r := range v.verdict.Checks {
		nameW = max(nameW, len(r.Name))
	}
	for _, r := range v.verdict.Checks {
		word := s.Pass.Render("pass")
		switch {
		case r.Empty:
			word = s.Dim.Render("empty")
		case !r.Passed:
			word = s.Fail.Render("FAIL")
		}
		lines = append(lines, "  "+checkMark(s, r)+" "+fit(r.Name, nameW)+"  "+fit(word, 5)+"  "+r.Detail)
	}
	if sum := v.verdict.Summary; v.faulted() {
		lines = append(lines,
			fmt.Sprintf("  %s n %d  pulled %d  p50 %s  max %s", s.Label.Render("faulted "), sum.Faulted.N, sum.Faulted.Pulled, fmtSeconds(sum.Faulted.P50), fmtSeconds(sum.Faulted.Max)),
			fmt.Sprintf("  %s n %d  pulled %d  max %s", s.Label.Render("healthy "), sum.Healthy.N, sum.Healthy.Pulled, fmtSeconds(sum.Healthy.Max)),
			fmt.Sprintf("  %s n %d  pulled %d", s.Label.Render("recovery"), sum.Recovery.N, sum.Recovery.Pulled),
		)
	}
	if t := v.verdict.Times; t != nil {
		lines = append(lines, "  "+s.Label.Render("times   ")+" "+timesLine(t))
	}
	lines = append(lines, steadyLines(s, v.verdict)...)
	if len(lines) > h {
		lines = lines[:h]
	}
	return block(lines, w, h)
}

// verdictLine is the final verdict in one line, when space is short.
func verdictLine(v *event.Verdict, s *Styles, w int) string {
	var b strings.Builder
	b.WriteString(s.Section.Render("verdict"))
	for _, r := range v.Checks {
		b.WriteString("  " + checkMark(s, r) + " " + r.Name)
	}
	return fit(b.String(), w)
}
