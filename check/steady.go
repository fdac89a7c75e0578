package check

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/event"
)

// Figures accumulates what a summary says of a set of pulls naming one
// source: counts and two bounded histograms (latency, TTFT), so its
// memory does not grow with the pulls it is fed. Steady uses one per
// source; a judge of many fault windows can keep one per window.
type Figures struct {
	n, ok, errs, hits, inFlight int
	lat, ttft                   *Hist
}

// NewFigures returns empty figures.
func NewFigures() *Figures { return &Figures{lat: NewHist(), ttft: NewHist()} }

// Add counts a pull that ended; one cut short by the run's end
// (Aborted) never answered and counts as in flight.
func (f *Figures) Add(s event.Sample) {
	if s.Aborted {
		f.inFlight++
		return
	}
	f.n++
	if s.Status == 200 {
		f.ok++
	}
	if s.Status != 200 || s.Err != "" {
		f.errs++
	}
	if s.Hit() {
		f.hits++
	}
	f.lat.Record(s.Latency)
	if s.TTFT > 0 {
		f.ttft.Record(s.TTFT)
	}
}

// AddInFlight counts a pull sent and not answered.
func (f *Figures) AddInFlight() { f.inFlight++ }

// Summary is the figures as source's summary.
func (f *Figures) Summary(source int) event.SourceSummary {
	s := event.SourceSummary{
		Source: source, N: f.n, OK: f.ok, Errors: f.errs, Pulled: f.hits, InFlight: f.inFlight,
		Latency: f.lat.Percentiles(),
	}
	if f.ttft.N() > 0 {
		t := f.ttft.Percentiles()
		s.TTFT = &t
	}
	return s
}

// Steady is each source's summary over the pulls of in started in
// [0, in.RunEnd) outside every one of windows (a window still open, End 0,
// runs to in.RunEnd): for a run without a fault, the whole run; for a run
// with faults, its steady state around them. Pulls in flight (in.Pending,
// and those cut short) are counted as such, not as errors. Every source
// of 0..sources-1 gets a line, also one no pull named; a sample naming a
// source out of that range gets one too.
func Steady(in Input, windows []event.Window, sources int) []event.SourceSummary {
	outside := func(start time.Duration) bool {
		if !inWindow(start, 0, in.RunEnd) {
			return false
		}
		for _, w := range windows {
			end := w.End
			if end == 0 {
				end = in.RunEnd
			}
			if inWindow(start, w.Start, end) {
				return false
			}
		}
		return true
	}
	by := map[int]*Figures{}
	get := func(src int) *Figures {
		f := by[src]
		if f == nil {
			f = NewFigures()
			by[src] = f
		}
		return f
	}
	for i := range sources {
		get(i)
	}
	for _, s := range in.Samples {
		if outside(s.Start) {
			get(s.Source).Add(s)
		}
	}
	for _, p := range in.Pending {
		if outside(p.Start) {
			get(p.Source).AddInFlight()
		}
	}
	out := make([]event.SourceSummary, 0, len(by))
	for src, f := range by {
		out = append(out, f.Summary(src))
	}
	slices.SortFunc(out, func(a, b event.SourceSummary) int { return cmp.Compare(a.Source, b.Source) })
	return out
}
