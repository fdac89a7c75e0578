package ui

import (
	"fmt"
	"strings"

	"p2pfault/event"
)

// whyLine is a source panel's line of what ended the pulls of its latest
// fault window that has any (the samples' causes, computed by the
// experiment): "why  handshake 44 · lookup_deadline 14 (window at 10.0s)".
// None before a pull of a window carries a cause, so a stream from before
// causes, or a run without a fault, reads as before.
type whyLine struct {
	sp *span
}

// whyOf is the line for src's latest window with causes counted.
func whyOf(src *sourceState) whyLine {
	for i := src.spans.Len() - 1; i >= 0; i-- {
		sp := src.spans.At(i)
		if sp.causes != nil {
			return whyLine{sp: &sp}
		}
	}
	return whyLine{}
}

func (l whyLine) lines(s *Styles) []string {
	if l.sp == nil {
		return nil
	}
	var parts []string
	for _, c := range event.Causes {
		if n := l.sp.causes.n[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return []string{s.Label.Render("why") + " " + strings.Join(parts, " · ") +
		s.Dim.Render(fmt.Sprintf(" (window at %.1fs)", l.sp.start.Seconds()))}
}
