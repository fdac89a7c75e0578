package experiment

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"p2pfault/event"
)

// namedTarget is a Target of which the scrape poller uses the name and
// URL only.
type namedTarget struct {
	Target
	name, url string
}

func (t namedTarget) Name() string    { return t.name }
func (t namedTarget) HTTPURL() string { return t.url }

type namedCluster struct{ srcs []Target }

func (c namedCluster) Sources() []Target          { return c.srcs[:len(c.srcs)-1] }
func (c namedCluster) Decoder() Target            { return c.srcs[len(c.srcs)-1] }
func (c namedCluster) Stop(context.Context) error { return nil }

// An engine whose /metrics exports none of the series read sends metrics
// events with every series absent (the faces show –), and no warning: it
// is not a failure. One whose /metrics does not answer is one warning,
// not one a second.
func TestScrapePollerOnEnginesWithoutTheSeries(t *testing.T) {
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n"))
	}))
	t.Cleanup(bare.Close)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	cl := namedCluster{srcs: []Target{
		namedTarget{name: "source-0", url: bare.URL},
		namedTarget{name: "decoder", url: broken.URL},
	}}
	var mu sync.Mutex
	var evs []event.Event
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	scrapePoller{cl: cl}.Run(ctx, func(ev event.Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	})
	var metrics, warnings int
	for _, ev := range evs {
		switch ev.Kind {
		case event.KindMetrics:
			metrics++
			m := ev.Metrics
			if m.Engine != "source-0" {
				t.Errorf("metrics of %s, which never answered", m.Engine)
			}
			r, l := m.Reading, m.Live
			if r.Running.OK || r.Waiting.OK || r.ExtHits.OK || r.ExtQueries.OK || r.P2PReadBytes.OK || l.HitRate.OK || l.P2PReadBps.OK {
				t.Errorf("an engine without the series reads %+v / %+v, want every one absent", r, l)
			}
		case event.KindWarning:
			warnings++
			t.Logf("warning: %s", ev.Message)
		}
	}
	if metrics < 2 {
		t.Errorf("%d metrics events in 2.5 s, want one a second", metrics)
	}
	if warnings != 1 {
		t.Errorf("%d warnings, want one for the decoder whose scrapes fail", warnings)
	}
}
