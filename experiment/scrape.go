package experiment

import (
	"context"

	"p2pfault/event"
	"p2pfault/scrape"
)

// scrapePoller reads every engine's /metrics once a second (package
// scrape) and sends each reading as a metrics event; a scrape that fails
// is one warning per streak of failures, and one more when it answers
// again, never an error per second.
type scrapePoller struct {
	cl Cluster
}

func (p scrapePoller) Run(ctx context.Context, emit func(event.Event)) {
	var ts []scrape.Target
	for _, t := range targets(p.cl) {
		ts = append(ts, scrape.Target{Name: t.Name(), URL: t.HTTPURL()})
	}
	s, err := scrape.New(scrape.Config{Targets: ts, Network: networkOf(p.cl)})
	if err != nil {
		emit(event.Event{Kind: event.KindWarning, Message: "engine metrics are not scraped: " + err.Error()})
		return
	}
	s.Run(ctx, func(u scrape.Update) {
		switch u.Kind {
		case scrape.KindScraped:
			emit(event.Event{Kind: event.KindMetrics, Metrics: &event.MetricsInfo{Engine: u.Engine, Reading: u.Reading, Live: u.Live}})
		case scrape.KindFailed, scrape.KindRecovered:
			emit(event.Event{Kind: event.KindWarning, Message: u.Message})
		}
	})
}
