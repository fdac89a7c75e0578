package ui

import (
	"math"
	"sort"
	"time"
)

// The figures of a source panel: what the pulls that ended in the rolling
// window say, worked out from the source's ring each frame.

// nearestRank is the q-quantile of sorted values.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencyStats summarise the pulls of a rolling window.
type latencyStats struct {
	n             int
	p50, p95, max time.Duration
	hits          int
}

// sparkBuckets is how many columns the hit-rate sparkline has.
const sparkBuckets = 20

// rollingStats summarises the points that ended in (from, to]: their
// latency figures and hits, and the hit rate of each of sparkBuckets
// equal stretches of the window (0 for a stretch without a pull).
func rollingStats(points *ring[point], from, to time.Duration) (latencyStats, []float64) {
	return rollingStatsOf(points, from, to, -1)
}

// rankStats is rollingStats of each of n data-parallel ranks' pulls alone
// (nil for a source of one rank): the source panel's breakdown.
func rankStats(points *ring[point], from, to time.Duration, n int) []latencyStats {
	if n <= 1 {
		return nil
	}
	out := make([]latencyStats, n)
	for r := range out {
		out[r], _ = rollingStatsOf(points, from, to, r)
	}
	return out
}

// decoderStats is rollingStats of the pulls through each of n decoders
// alone (nil for a run of one decoder): the source panel's breakdown by
// decoder (issue #41).
func decoderStats(points *ring[point], from, to time.Duration, n int) []latencyStats {
	if n <= 1 {
		return nil
	}
	out := make([]latencyStats, n)
	for d := range out {
		out[d], _ = rollingStatsWhere(points, from, to, func(p point) bool { return p.decoder == d })
	}
	return out
}

// rollingStatsOf is rollingStats of rank's pulls only (rank -1: all).
func rollingStatsOf(points *ring[point], from, to time.Duration, rank int) (latencyStats, []float64) {
	return rollingStatsWhere(points, from, to, func(p point) bool { return rank < 0 || p.rank == rank })
}

// rollingStatsWhere is rollingStats of the pulls keep takes.
func rollingStatsWhere(points *ring[point], from, to time.Duration, keep func(point) bool) (latencyStats, []float64) {
	recent := to - from
	var lats []time.Duration
	var hitB, nB [sparkBuckets]int
	st := latencyStats{}
	for j := 0; j < points.Len(); j++ {
		p := points.At(j)
		if p.end <= from || p.end > to || !keep(p) {
			continue
		}
		lats = append(lats, p.latency)
		if p.hit {
			st.hits++
		}
		b := int(float64(p.end-from) / float64(recent) * sparkBuckets)
		b = min(max(b, 0), sparkBuckets-1)
		nB[b]++
		if p.hit {
			hitB[b]++
		}
	}
	st.n = len(lats)
	if st.n > 0 {
		sort.Slice(lats, func(a, b int) bool { return lats[a] < lats[b] })
		st.p50 = nearestRank(lats, 0.50)
		st.p95 = nearestRank(lats, 0.95)
		st.max = lats[len(lats)-1]
	}
	spark := make([]float64, sparkBuckets)
	for b := range spark {
		if nB[b] > 0 {
			spark[b] = float64(hitB[b]) / float64(nB[b])
		}
	}
	return st, spark
}
