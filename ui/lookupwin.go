package ui

import (
	"fmt"
	"time"

	"p2pfault/event"
	"p2pfault/scrape"
)

// The windows show the lookup delay of the decoder (decoder-0 of
// several): it grows when a source it pulls from is busy (vLLM #55179),
// as the report's lookup_delay rows read it (report.DecoderEngine).

// maxBaselinePoints bounds the decoder's readings kept before the first
// fault window (an hour at one scrape a second): a soak's baseline is its
// last hour before that window.
const maxBaselinePoints = 3600

// lookupWindows is the decoder's async lookup delay in each fault window
// beside the idle baseline before the first, computed from its /metrics
// readings by the report's own span (scrape.Window over the readings, its
// LookupAsync: report.lookupRows), so the dashboard and the report give
// one figure. Only the readings a span still needs are kept: those before
// the first window until it opens, then from the last one at or before
// the earliest open window's start.
type lookupWindows struct {
	points   []scrape.Point
	exported bool // the decoder exports the histogram
	baseline *event.Delay
	windows  []lookupWindow
}

// lookupWindow is one fault window's lookup delay: live while it is
// open, fixed once it closed.
type lookupWindow struct {
	n     int // the window's number, in the order windows opened (the report's)
	w     event.Window
	open  bool
	delay event.Delay
}

// addReading takes the decoder's reading at t.
func (l *lookupWindows) addReading(t time.Duration, r event.Reading) {
	l.exported = l.exported || r.LookupAsync != nil
	l.points = append(l.points, scrape.Point{T: t, Reading: r})
	l.prune()
}

// prune drops the readings no span needs any more.
func (l *lookupWindows) prune() {
	if l.baseline == nil {
		if n := len(l.points); n > maxBaselinePoints {
			l.points = l.points[n-maxBaselinePoints:]
		}
		return
	}
	anchor := time.Duration(-1)
	for _, w := range l.windows {
		if w.open && (anchor < 0 || w.w.Start < anchor) {
			anchor = w.w.Start
		}
	}
	keep := len(l.points) - 1 // no window open: the latest, the next one's anchor
	if anchor >= 0 {
		keep = 0
		for i, p := range l.points {
			if p.T <= anchor {
				keep = i
			}
		}
	}
	l.points = l.points[max(keep, 0):]
}

// span is the decoder's lookup delay over [from, to), as the report
// reads a span.
func (l *lookupWindows) span(from, to time.Duration) event.Delay {
	return scrape.Window(l.points, from, to).LookupAsync
}

// window takes a window event: one opening, or one closing; closed is the
// window it closed with its delay, and the baseline, when the decoder
// exports the histogram.
func (l *lookupWindows) window(w event.Window) (closed lookupWindow, base event.Delay, ok bool) {
	if w.End == 0 {
		for _, o := range l.windows {
			if o.open && o.w.Source == w.Source && o.w.Start == w.Start {
				return lookupWindow{}, event.Delay{}, false // the same window sent again
			}
		}
		if l.baseline == nil {
			b := l.span(0, w.Start)
			l.baseline = &b
		}
		n := 1
		if k := len(l.windows); k > 0 {
			n = l.windows[k-1].n + 1
		}
		l.windows = append(l.windows, lookupWindow{n: n, w: w, open: true})
		if len(l.windows) > maxWindowRows {
			l.windows = l.windows[len(l.windows)-maxWindowRows:]
		}
		l.prune()
		return lookupWindow{}, event.Delay{}, false
	}
	for i := range l.windows {
		lw := &l.windows[i]
		if lw.open && lw.w.Source == w.Source && lw.w.Start == w.Start {
			lw.w, lw.open, lw.delay = w, false, l.span(w.Start, w.End)
			l.prune()
			return *lw, *l.baseline, l.exported
		}
	}
	return lookupWindow{}, event.Delay{}, false
}

// latest is the newest window's delay by now (an open one's so far) and
// the baseline; ok is false before a window opened or when the decoder
// does not export the histogram.
func (l *lookupWindows) latest(now time.Duration) (lookupWindow, event.Delay, bool) {
	if !l.exported || len(l.windows) == 0 || l.baseline == nil {
		return lookupWindow{}, event.Delay{}, false
	}
	lw := l.windows[len(l.windows)-1]
	if lw.open {
		lw.delay = l.span(lw.w.Start, now+1)
	}
	return lw, *l.baseline, true
}

// lookupWindowText is a window's lookup delay beside the baseline: "window
// 1 busy source-0: lookup p50 27ms / max ≤100ms (baseline 5ms)".
func lookupWindowText(lw lookupWindow, base event.Delay) string {
	what := fmt.Sprintf("window %d %s %s", lw.n, orDash(lw.w.Kind), lw.w.TargetName())
	if lw.open {
		what += " (open)"
	}
	text := what + ": lookup "
	if p50, top, ok := delayFigures(lw.delay); ok {
		text += "p50 " + p50 + " / max " + top
	} else {
		text += "none"
	}
	if p50, _, ok := delayFigures(base); ok {
		return text + " (baseline " + p50 + ")"
	}
	return text + " (baseline none)"
}
