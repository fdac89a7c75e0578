package scrape

import (
	"math"

	"p2pfault/event"
)

func lookupAsync(r event.Reading) *event.Histogram { return r.LookupAsync }
func lookupSync(r event.Reading) *event.Histogram  { return r.LookupSync }

// gained is what a histogram gained from prev to cur, bucket by bucket;
// a count that fell is a reset (the engine restarted): cur is what was
// observed since. nil when either reading lacks it.
func gained(prev, cur *event.Histogram) *event.Histogram {
	if prev == nil || cur == nil {
		return nil
	}
	if cur.Count < prev.Count {
		return cur
	}
	g := &event.Histogram{Count: cur.Count - prev.Count, Sum: cur.Sum - prev.Sum}
	for _, b := range cur.Buckets {
		n := b.N
		for _, p := range prev.Buckets {
			if p.Le == b.Le {
				n -= p.N
			}
		}
		g.Buckets = append(g.Buckets, event.Bucket{Le: b.Le, N: max(n, 0)})
	}
	return g
}

// delayOver is what the histogram get reads gained over points, in order,
// as a Delay.
func delayOver(points []Point, get func(event.Reading) *event.Histogram) event.Delay {
	var total *event.Histogram
	exported := false
	for i, p := range points {
		exported = exported || get(p.Reading) != nil
		if i == 0 {
			continue
		}
		g := gained(get(points[i-1].Reading), get(p.Reading))
		if g == nil {
			continue
		}
		if total == nil {
			total = &event.Histogram{}
		}
		total.Count += g.Count
		total.Sum += g.Sum
		for _, b := range g.Buckets {
			total.Buckets = addBucket(total.Buckets, b.Le, b.N)
		}
	}
	d := event.Delay{Exported: exported}
	if total == nil || total.Count <= 0 {
		return d
	}
	return DelayOf(*total, exported)
}

// DelayOf summarises what a histogram holds (its gain over a span).
func DelayOf(h event.Histogram, exported bool) event.Delay {
	d := event.Delay{Exported: exported, N: int(math.Round(h.Count))}
	if h.Count <= 0 {
		return d
	}
	d.Mean = event.MetricOf(h.Sum / h.Count)
	d.P50 = event.MetricOf(Quantile(h, 0.5))
	below := 0.0
	for _, b := range h.Buckets {
		if b.N > below {
			d.Max = event.MetricOf(b.Le)
		}
		below = max(below, b.N)
	}
	if n := len(h.Buckets); n > 0 && h.Count > h.Buckets[n-1].N {
		d.Max, d.Over = event.MetricOf(h.Buckets[n-1].Le), true
	}
	return d
}

// Quantile is q (0 to 1) of a histogram's observations as Prometheus's
// histogram_quantile places it: linear within the bucket the rank falls
// in (from 0 for the first), the highest finite bound when it falls
// past it.
func Quantile(h event.Histogram, q float64) float64 {
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for _, b := range h.Buckets {
		if b.N >= rank && b.N > below {
			return lower + (b.Le-lower)*(rank-below)/(b.N-below)
		}
		lower, below = b.Le, b.N
	}
	return lower
}
