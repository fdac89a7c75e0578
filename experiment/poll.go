package experiment

import (
	"context"
	"time"

	"p2pfault/event"
)

// Poller watches something of a running cluster and reports it as
// events until ctx ends. Run starts every poller in pollers; a new source
// of live figures (an engine's /metrics) is one more Poller.
type Poller interface {
	Run(ctx context.Context, emit func(event.Event))
}

// pollers are what a run watches besides its probe.
func (e *Experiment) pollers(cl Cluster) []Poller {
	ps := []Poller{enginePoller{send: e.emitEngines, every: time.Second}, scrapePoller{cl: cl}}
	if e.links != nil {
		ps = append(ps, linkPoller{ls: e.links, every: time.Second})
	}
	return ps
}

// startPollers runs every poller until ctx ends; a panic in one fails the
// run.
func (e *Experiment) startPollers(ctx context.Context, cl Cluster) {
	for _, p := range e.pollers(cl) {
		go e.safely(func() { p.Run(ctx, e.emit) })
	}
}

// enginePoller sends every engine's state (and the sources' conditions)
// once a period, so uptimes move and a stop that /proc shows is seen
// between changes.
type enginePoller struct {
	send  func()
	every time.Duration
}

func (p enginePoller) Run(ctx context.Context, _ func(event.Event)) { Every(ctx, p.every, p.send) }

// Every calls fn once a period until ctx ends: how a poller (and a cluster
// that watches its own engines) paces itself.
func Every(ctx context.Context, period time.Duration, fn func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn()
		}
	}
}
