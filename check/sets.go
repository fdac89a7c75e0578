package check

import (
	"slices"
	"time"

	"p2pfault/event"
)

// exactLatencies is how many latencies a set keeps exactly; past that it
// keeps a Hist (three significant digits) instead. A fault window of the
// seed's rate holds ~60 pulls naming the faulted source, so its figures
// (the seed's table: p50 to the hundredth) are exact; a set of any size
// costs at most this many values, or the histogram's few kB.
const exactLatencies = 4096

// latencies is a set of durations for their median: exact up to
// exactLatencies values, then a bounded histogram. The zero value is an
// empty set.
type latencies struct {
	exact []time.Duration
	hist  *Hist // non-nil once the set outgrew exact
}

func (l *latencies) add(d time.Duration) {
	if l.hist != nil {
		l.hist.Record(d)
		return
	}
	l.exact = append(l.exact, d)
	if len(l.exact) > exactLatencies {
		l.hist = NewHist()
		for _, v := range l.exact {
			l.hist.Record(v)
		}
		l.exact = nil
	}
}

// median is the median of the set and extra (Median's, exactly, while the
// set is exact; the histogram's p50 once it is not). Neither is modified.
func (l *latencies) median(extra []time.Duration) time.Duration {
	if l.hist == nil {
		if len(extra) == 0 {
			return Median(l.exact)
		}
		return Median(append(slices.Clone(l.exact), extra...))
	}
	h := l.hist
	if len(extra) > 0 {
		h = NewHist()
		h.Merge(l.hist)
		for _, d := range extra {
			h.Record(d)
		}
	}
	return h.Quantile(50)
}

// clone is a copy that shares nothing with l.
func (l *latencies) clone() latencies {
	c := latencies{exact: slices.Clone(l.exact)}
	if l.hist != nil {
		c.hist = NewHist()
		c.hist.Merge(l.hist)
	}
	return c
}

// pullSet is what the checks read of a set of pulls that ended: how many,
// how many hit, the slowest and the latencies' median, kept as running
// figures (O(1) in the pulls, see latencies) so a judge can keep one per
// fault window however long the run.
type pullSet struct {
	n, hits int
	max     time.Duration
	lat     latencies
}

func (p *pullSet) add(s event.Sample) {
	p.n++
	if s.Hit() {
		p.hits++
	}
	p.max = max(p.max, s.Latency)
	p.lat.add(s.Latency)
}

// clone is a copy of p sharing nothing with it.
func (p *pullSet) clone() pullSet {
	c := *p
	c.lat = p.lat.clone()
	return c
}

// stats are the set's figures as the seed's summary line has them.
func (p *pullSet) stats() event.Stats {
	return event.Stats{N: p.n, Pulled: p.hits, P50: p.lat.median(nil), Max: p.max}
}

// allSet is what all_200 reads of the pulls that ended: how many, how many
// did not return 200, and the first of those (by start, then trial).
type allSet struct {
	n, bad int
	first  event.Sample
}

func (a *allSet) add(s event.Sample) {
	a.n++
	if s.Status == 200 {
		return
	}
	if a.bad == 0 || cmpStart(s, a.first) < 0 {
		a.first = s
	}
	a.bad++
}

func ages(in []inflight) []time.Duration {
	out := make([]time.Duration, len(in))
	for i, p := range in {
		out[i] = p.Age
	}
	return out
}
