package scrape

import (
	"math"
	"time"

	"p2pfault/event"
)

// Point is one reading at a time: T is since the run's t0 for the report's
// windows, or any monotonic origin for the live rates.
type Point struct {
	T       time.Duration `json:"t_ns"`
	Reading event.Reading `json:"reading"`
}

// increase is how much a counter rose over points, in order. A drop is a
// reset (the engine restarted after a kill): the value after it is what was
// counted since, as Prometheus's increase() reads it. Absent when no two
// consecutive points both have the series.
func increase(points []Point, get func(event.Reading) event.MetricValue) event.MetricValue {
	var inc event.MetricValue
	for i := 1; i < len(points); i++ {
		prev, cur := get(points[i-1].Reading), get(points[i].Reading)
		if !prev.OK || !cur.OK {
			continue
		}
		d := cur.V - prev.V
		if d < 0 {
			d = cur.V
		}
		inc = event.MetricOf(inc.V + d)
	}
	return inc
}

// peak is a gauge's highest value over points; absent when no point has it.
func peak(points []Point, get func(event.Reading) event.MetricValue) event.MetricValue {
	var p event.MetricValue
	for _, pt := range points {
		if v := get(pt.Reading); v.OK && (!p.OK || v.V > p.V) {
			p = v
		}
	}
	return p
}

func extHits(r event.Reading) event.MetricValue    { return r.ExtHits }
func extQueries(r event.Reading) event.MetricValue { return r.ExtQueries }
func p2pBytes(r event.Reading) event.MetricValue   { return r.P2PReadBytes }
func running(r event.Reading) event.MetricValue    { return r.Running }
func waiting(r event.Reading) event.MetricValue    { return r.Waiting }

// ratio is a/b, absent when either is or b is 0 (no queries: no rate).
func ratio(a, b event.MetricValue) event.MetricValue {
	if !a.OK || !b.OK || b.V == 0 {
		return event.MetricValue{}
	}
	return event.MetricOf(a.V / b.V)
}

// Deltas are one engine's figures over a window of the run, for the report.
type Deltas struct {
	ExtHits      event.MetricValue `json:"ext_hits"`       // tokens hit in the external cache (own CPU tier and P2P)
	ExtQueries   event.MetricValue `json:"ext_queries"`    // tokens asked of it
	HitRate      event.MetricValue `json:"hit_rate"`       // ExtHits / ExtQueries
	P2PReadBytes event.MetricValue `json:"p2p_read_bytes"` // bytes read over P2P
	MaxRunning   event.MetricValue `json:"max_running"`
	MaxWaiting   event.MetricValue `json:"max_waiting"`
	// The lookup delays observed over the window.
	LookupAsync event.Delay `json:"lookup_async"`
	LookupSync  event.Delay `json:"lookup_sync"`
	// The scrapes the counter deltas span: the last one at or before the
	// window's start (the first one in it when there is none before) to the
	// last one at or before its end.
	From time.Duration `json:"from_ns"`
	To   time.Duration `json:"to_ns"`
}

// Window gives the deltas over [from, to) of points (in time order, one
// engine's). Gauge peaks look at the scrapes inside the window. Everything
// is absent when fewer than two scrapes bound it.
func Window(points []Point, from, to time.Duration) Deltas {
	first, last := -1, -1
	for i, p := range points {
		if p.T <= from {
			first = i
		}
		if p.T < to {
			last = i
		}
	}
	if first < 0 {
		// No scrape before the window: start at the first one inside it.
		for i, p := range points {
			if p.T >= from && p.T < to {
				first = i
				break
			}
		}
	}
	var d Deltas
	if first >= 0 && last >= 0 && first <= last {
		inside := points[first : last+1]
		if points[first].T < from {
			inside = inside[1:]
		}
		d.MaxRunning = peak(inside, running)
		d.MaxWaiting = peak(inside, waiting)
		d.LookupAsync = delayOver(points[first:last+1], lookupAsync)
		d.LookupSync = delayOver(points[first:last+1], lookupSync)
	}
	if first < 0 || last <= first {
		return d
	}
	span := points[first : last+1]
	d.From, d.To = span[0].T, span[len(span)-1].T
	d.ExtHits = increase(span, extHits)
	d.ExtQueries = increase(span, extQueries)
	d.HitRate = ratio(d.ExtHits, d.ExtQueries)
	d.P2PReadBytes = increase(span, p2pBytes)
	return d
}

// history keeps an engine's points of the last rate window, plus the one
// just before it as the baseline of the rates.
type history struct {
	window time.Duration
	points []Point
}

func (h *history) add(p Point) event.Live {
	h.points = append(h.points, p)
	// Keep the newest point at or before p.T - window as the baseline.
	cut := 0
	for i, q := range h.points {
		if q.T <= p.T-h.window {
			cut = i
		}
	}
	if cut > 0 {
		h.points = append(h.points[:0], h.points[cut:]...)
	}
	l := event.Live{Running: p.Reading.Running, Waiting: p.Reading.Waiting}
	if len(h.points) < 2 {
		return l
	}
	l.Window = p.T - h.points[0].T
	l.HitRate = ratio(increase(h.points, extHits), increase(h.points, extQueries))
	if b := increase(h.points, p2pBytes); b.OK && l.Window > 0 {
		l.P2PReadBps = event.MetricOf(b.V / l.Window.Seconds())
	}
	l.LookupAsync = delayOver(h.points, lookupAsync)
	if l.HitRate.OK && (math.IsNaN(l.HitRate.V) || l.HitRate.V < 0) {
		l.HitRate = event.MetricValue{}
	}
	return l
}
