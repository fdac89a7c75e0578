package scrape

import (
	"testing"
	"time"

	"p2pfault/event"
)

const sec = time.Second

// at is a decoder's reading at t seconds: hits and queries in tokens,
// p2p in bytes, waiting requests.
func at(t float64, hits, queries, p2p, wait float64) Point {
	return Point{T: time.Duration(t * float64(sec)), Reading: event.Reading{
		Running: event.MetricOf(0), Waiting: event.MetricOf(wait), ExtHits: event.MetricOf(hits), ExtQueries: event.MetricOf(queries), P2PReadBytes: event.MetricOf(p2p)}}
}

func TestWindow(t *testing.T) {
	points := []Point{
		at(0, 0, 0, 0, 0),
		at(1, 384, 400, 100, 0),
		at(2, 768, 800, 200, 1),  // fault window [2s, 5s) opens
		at(3, 768, 1200, 200, 4), // the stalled source answers no lookup
		at(4, 768, 1600, 200, 6),
		at(5, 1152, 2000, 300, 2), // recovery window [5s, 8s)
		at(6, 384, 400, 100, 0),   // the decoder restarted: counters reset
		at(7, 768, 800, 200, 0),
	}
	tests := []struct {
		name                      string
		from, to                  time.Duration
		hits, queries, p2p, waitP event.MetricValue
		rate                      event.MetricValue
		spanFrom, spanTo          time.Duration
	}{
		{name: "fault window from the scrape at its start", from: 2 * sec, to: 5 * sec,
			hits: event.MetricOf(0), queries: event.MetricOf(800), p2p: event.MetricOf(0), waitP: event.MetricOf(6), rate: event.MetricOf(0), spanFrom: 2 * sec, spanTo: 4 * sec},
		{name: "a window between scrapes starts at the one before", from: 2500 * time.Millisecond, to: 5500 * time.Millisecond,
			hits: event.MetricOf(384), queries: event.MetricOf(1200), p2p: event.MetricOf(100), waitP: event.MetricOf(6), rate: event.MetricOf(384.0 / 1200), spanFrom: 2 * sec, spanTo: 5 * sec},
		{name: "a reset counts what came after it", from: 5 * sec, to: 8 * sec,
			hits: event.MetricOf(768), queries: event.MetricOf(800), p2p: event.MetricOf(200), waitP: event.MetricOf(2), rate: event.MetricOf(768.0 / 800), spanFrom: 5 * sec, spanTo: 7 * sec},
		{name: "no scrape before: from the first inside", from: -5 * sec, to: 2 * sec,
			hits: event.MetricOf(384), queries: event.MetricOf(400), p2p: event.MetricOf(100), waitP: event.MetricOf(0), rate: event.MetricOf(384.0 / 400), spanFrom: 0, spanTo: sec},
		{name: "one scrape only: no delta", from: 7 * sec, to: 9 * sec, waitP: event.MetricOf(0)},
		{name: "after every scrape", from: 20 * sec, to: 30 * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Window(points, tt.from, tt.to)
			if d.ExtHits != tt.hits || d.ExtQueries != tt.queries || d.P2PReadBytes != tt.p2p || d.MaxWaiting != tt.waitP || d.HitRate != tt.rate {
				t.Errorf("got hits %v queries %v p2p %v max waiting %v rate %v\nwant hits %v queries %v p2p %v max waiting %v rate %v",
					d.ExtHits, d.ExtQueries, d.P2PReadBytes, d.MaxWaiting, d.HitRate, tt.hits, tt.queries, tt.p2p, tt.waitP, tt.rate)
			}
			if tt.hits.OK && (d.From != tt.spanFrom || d.To != tt.spanTo) {
				t.Errorf("span %s..%s, want %s..%s", d.From, d.To, tt.spanFrom, tt.spanTo)
			}
		})
	}
}

func TestWindowOfAnEngineExportingNothing(t *testing.T) {
	points := []Point{{T: 0}, {T: sec}, {T: 2 * sec}}
	if d := Window(points, 0, 3*sec); d.ExtHits.OK || d.HitRate.OK || d.P2PReadBytes.OK || d.MaxWaiting.OK {
		t.Errorf("got %+v, want every figure absent", d)
	}
}

func TestLiveRatesOverTheLastWindow(t *testing.T) {
	h := history{window: 10 * sec}
	l := h.add(at(0, 0, 0, 0, 0))
	if l.HitRate.OK || l.P2PReadBps.OK || l.Waiting != event.MetricOf(0) {
		t.Errorf("first scrape: %+v, want gauges only, no rates", l)
	}
	l = h.add(at(1, 0, 0, 0, 0))
	if l.HitRate.OK {
		t.Errorf("no queries yet: hit rate %v, want absent", l.HitRate)
	}
	if l.P2PReadBps != event.MetricOf(0) {
		t.Errorf("no bytes yet: %v, want 0 B/s", l.P2PReadBps)
	}
	// Ten seconds of full hits: 384 of 400 tokens, 12 MiB, per second.
	for i := 2; i <= 11; i++ {
		l = h.add(at(float64(i), float64(384*(i-1)), float64(400*(i-1)), float64(12<<20*(i-1)), 0))
	}
	if l.HitRate != event.MetricOf(0.96) || l.P2PReadBps != event.MetricOf(12<<20) || l.Window != 10*sec {
		t.Errorf("steady hits: %+v, want rate 0.96, 12 MiB/s over 10s", l)
	}
	// Then a stall: queries go on, nothing hits. Ten seconds later the
	// window holds only the stall.
	for i := 12; i <= 21; i++ {
		l = h.add(at(float64(i), 384*10, float64(400*(i-1)), 12<<20*10, 3))
	}
	if l.HitRate != event.MetricOf(0) || l.P2PReadBps != event.MetricOf(0) || l.Waiting != event.MetricOf(3) {
		t.Errorf("after 10s of stall: %+v, want rate 0, 0 B/s, 3 waiting", l)
	}
	if len(h.points) != 11 {
		t.Errorf("history holds %d points, want 11 (10 s at 1/s plus the baseline)", len(h.points))
	}
}
