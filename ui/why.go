package ui

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
)

// whyLine is a source panel's lines of what ended the pulls of its latest
// fault window that has any (the samples' causes, computed by the
// experiment): "why  handshake 44 · lookup_deadline 14 (window at 10.0s)",
// and once a pull sent in its recovery window has a cause, those too, as
// the report's why table counts them ("after  p2p 18 · handshake 32 (to
// 44.4s)"). None before a pull of a window carries a cause, so a stream
// from before causes, or a run without a fault, reads as before.
type whyLine struct {
	sp  *span
	rec time.Duration // the recovery window's length, the run's bound
}

// whyOf is the lines for src's latest window with causes counted.
func whyOf(src *sourceState, rec time.Duration) whyLine {
	for i := src.spans.Len() - 1; i >= 0; i-- {
		sp := src.spans.At(i)
		if sp.causes != nil || sp.after != nil {
			return whyLine{sp: &sp, rec: rec}
		}
	}
	return whyLine{}
}

func (l whyLine) lines(s *Styles) []string {
	if l.sp == nil {
		return nil
	}
	var out []string
	if l.sp.causes != nil {
		out = append(out, s.Label.Render("why")+" "+l.sp.causes.words()+
			s.Dim.Render(fmt.Sprintf(" (window at %.1fs)", l.sp.start.Seconds())))
	}
	if l.sp.after != nil {
		out = append(out, s.Label.Render("after")+" "+l.sp.after.words()+
			s.Dim.Render(fmt.Sprintf(" (recovery %.1fs–%.1fs)", l.sp.end.Seconds(), (l.sp.end+l.rec).Seconds())))
	}
	return out
}

// words is the tally in event.Causes' order: "local 1 · handshake 29".
func (t *causeTally) words() string {
	var parts []string
	for _, c := range event.Causes {
		if n := t.n[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return strings.Join(parts, " · ")
}
