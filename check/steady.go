package check

import (
	"p2pfault/event"
)

// Figures accumulates what a summary says of a set of pulls naming one
// source: counts and two bounded histograms (latency, TTFT), so its
// memory does not grow with the pulls it is fed. The judge keeps one
// per source for its steady state (the pulls outside every window).
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

// clone is a copy of f sharing nothing with it.
func (f *Figures) clone() *Figures {
	c := *f
	c.lat, c.ttft = NewHist(), NewHist()
	c.lat.Merge(f.lat)
	c.ttft.Merge(f.ttft)
	return &c
}
