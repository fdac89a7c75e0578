package check

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"p2pfault/event"
)

// The range and precision of a Hist: microseconds from 1 µs to an hour, to
// three significant digits (every value within 0.1 %). A longer pull
// (none is: the probe's pull timeout is a minute) is counted at an hour and
// still gives the exact Max.
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histDigits  = 3
)

// Hist is a bounded latency histogram: what a run of any length keeps of
// a set of durations to give their percentiles, instead of every sample.
// It is HdrHistogram's sparse (packed) form, so it grows with the distinct
// buckets the values fall in (a few kB for pulls that take about the same
// time) and never past the range's buckets, however many values it holds.
// The zero value is not ready: use NewHist. Not safe for concurrent use.
type Hist struct {
	h   *hdrhistogram.PackedHistogram
	max time.Duration // exact, also past the range
}

// NewHist returns an empty histogram.
func NewHist() *Hist {
	return &Hist{h: hdrhistogram.NewPacked(histLowest, histHighest, histDigits)}
}

// Record adds one duration; a negative one counts as 0.
func (h *Hist) Record(d time.Duration) {
	d = max(d, 0)
	h.max = max(h.max, d)
	us := min(int64(d/time.Microsecond), histHighest)
	// In range by construction: RecordValue fails only on a negative or
	// untrackable value.
	_ = h.h.RecordValue(us)
}

// Merge adds every value of o.
func (h *Hist) Merge(o *Hist) {
	h.h.Merge(o.h)
	h.max = max(h.max, o.max)
}

// N is how many durations were recorded.
func (h *Hist) N() int { return int(h.h.TotalCount()) }

// Max is the largest duration recorded, exactly; 0 for none.
func (h *Hist) Max() time.Duration { return h.max }

// Quantile is the duration at percentile p (0 to 100), the highest value
// equivalent to it at the histogram's precision; never above Max. 0 when
// empty.
func (h *Hist) Quantile(p float64) time.Duration {
	if h.N() == 0 {
		return 0
	}
	return min(time.Duration(h.h.ValueAtPercentile(p))*time.Microsecond, h.max)
}

// Percentiles are p50, p90, p99 and the max.
func (h *Hist) Percentiles() event.Percentiles {
	if h.N() == 0 {
		return event.Percentiles{}
	}
	qs := h.h.ValueAtPercentilesSlice([]float64{50, 90, 99})
	at := func(i int) time.Duration { return min(time.Duration(qs[i])*time.Microsecond, h.max) }
	return event.Percentiles{N: h.N(), P50: at(0), P90: at(1), P99: at(2), Max: h.max}
}
