package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"p2pfault/event"
)

// recorder keeps the updates of a Run, checking they never overlap.
type recorder struct {
	mu      sync.Mutex
	busy    atomic.Bool
	t       *testing.T
	updates []Update
}

func (r *recorder) emit(u Update) {
	if !r.busy.CompareAndSwap(false, true) {
		r.t.Error("emit called concurrently")
	}
	defer r.busy.Store(false)
	r.mu.Lock()
	r.updates = append(r.updates, u)
	r.mu.Unlock()
}

func (r *recorder) of(engine string, k Kind) []Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Update
	for _, u := range r.updates {
		if u.Engine == engine && u.Kind == k {
			out = append(out, u)
		}
	}
	return out
}

func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func text(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}
}

// runUntil runs s until enough holds of what rec got (or 20 s passed):
// the test waits for the scrapes it judges, which a loaded machine can
// make slower than any fixed run.
func runUntil(t *testing.T, s *Scraper, rec *recorder, enough func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { s.Run(ctx, rec.emit); close(done) }()
	for ctx.Err() == nil && !enough() {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestRunScrapesEachEngineAndToldFailuresOnce: a healthy engine, one that
// exports none of the series, one that fails a while and recovers, and
// one that hangs: each scraped on its own schedule, absent series absent,
// each failure streak told once and its end once.
func TestRunScrapesEachEngineAndToldFailuresOnce(t *testing.T) {
	var flaky atomic.Int32
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cfg := Config{
		Interval: 50 * time.Millisecond,
		// Two seconds, not the interval: a loaded machine can make a
		// healthy in-process server take longer than 50 ms to answer.
		Timeout: 2 * time.Second,
		Targets: []Target{
			{Name: "decoder", URL: serve(t, text(vllmText))},
			{Name: "bare", URL: serve(t, text(noneText))},
			{Name: "flaky", URL: serve(t, func(w http.ResponseWriter, r *http.Request) {
				// Fails its 2nd to 6th scrapes, then answers.
				if n := flaky.Add(1); n >= 2 && n <= 6 {
					http.Error(w, "engine busy", http.StatusServiceUnavailable)
					return
				}
				text(vllmText)(w, r)
			})},
			{Name: "hung", URL: serve(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})},
		},
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{t: t}
	runUntil(t, s, rec, func() bool {
		return len(rec.of("hung", KindFailed)) > 0 && len(rec.of("decoder", KindScraped)) >= 10 &&
			len(rec.of("bare", KindScraped)) >= 10 && len(rec.of("flaky", KindRecovered)) > 0
	})
	// The hung engine must not slow the others: the decoder is scraped ten
	// times (half a second at 50 ms) while its first scrape waits out 2 s.
	dec := rec.of("decoder", KindScraped)
	if hung := rec.of("hung", KindFailed); len(dec) < 10 || len(hung) == 0 || !dec[9].At.Before(hung[0].At.Add(cfg.Timeout)) {
		t.Errorf("decoder scraped %d times, want ten before the hung engine's scrape gave up", len(dec))
	}
	if last := dec[len(dec)-1]; last.Reading.Waiting != event.MetricOf(7) || last.Live.Running != event.MetricOf(4) || last.Live.HitRate.OK {
		// Counters do not move between scrapes: no queries in the window, no rate.
		t.Errorf("decoder's last update: %+v", last)
	}
	bare := rec.of("bare", KindScraped)
	if len(bare) < 10 || len(rec.of("bare", KindFailed)) != 0 {
		t.Errorf("engine exporting nothing: %d scrapes, %d failures; want it scraped, not failed", len(bare), len(rec.of("bare", KindFailed)))
	}
	for _, u := range bare {
		if u.Reading != (event.Reading{}) || u.Live.Running.OK || u.Live.Waiting.OK || u.Live.HitRate.OK || u.Live.P2PReadBps.OK {
			t.Fatalf("engine exporting nothing reads %+v / %+v, want all absent", u.Reading, u.Live)
		}
	}
	failed, recovered := rec.of("flaky", KindFailed), rec.of("flaky", KindRecovered)
	if len(failed) != 1 || len(recovered) != 1 {
		t.Fatalf("flaky engine: %d failure updates, %d recoveries; want 1 and 1", len(failed), len(recovered))
	}
	if !strings.Contains(failed[0].Err, "503 Service Unavailable") || !strings.Contains(failed[0].Message, "metrics of flaky") {
		t.Errorf("failure told as %q / %q", failed[0].Err, failed[0].Message)
	}
	if recovered[0].Failures != 5 || !strings.Contains(recovered[0].Message, "after 5 failed scrapes") {
		t.Errorf("recovery told as %+v", recovered[0])
	}
	if !recovered[0].At.After(failed[0].At) {
		t.Error("recovery before the failure")
	}
	hung := rec.of("hung", KindFailed)
	if len(hung) != 1 || !strings.Contains(hung[0].Err, "no answer within 2s") || len(rec.of("hung", KindScraped)) != 0 {
		t.Errorf("hung engine: failures %+v, %d scrapes; want one 'no answer within 2s'", hung, len(rec.of("hung", KindScraped)))
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{
		Targets:  []Target{{Name: "a", URL: "http://127.0.0.1:1"}, {Name: "a", URL: "ftp://x"}, {URL: "http://h"}},
		Interval: -time.Second,
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"engine a: named twice", `engine a: URL "ftp://x"`, "engine #2: no name", "interval -1s is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "no engine to scrape") {
		t.Errorf("empty config: %v", err)
	}
	s, err := New(Config{Targets: []Target{{Name: "d", URL: "http://127.0.0.1:8200/"}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.cfg; c.Interval != time.Second || c.Timeout != time.Second || c.RateWindow != 10*time.Second {
		t.Errorf("defaults: %+v", c)
	}
}

func TestFetchSaysWhyAScrapeFailed(t *testing.T) {
	s, err := New(Config{Targets: []Target{{Name: "x", URL: "http://127.0.0.1:1"}}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	garbage := serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{not metrics\n")) })
	if _, err := s.Fetch(context.Background(), garbage+"/metrics"); err == nil || !strings.Contains(err.Error(), "parse metrics") {
		t.Errorf("garbage: %v", err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	u := closed.URL
	closed.Close()
	if _, err := s.Fetch(context.Background(), u+"/metrics"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("closed port: %v", err)
	}
}

func newServer(h http.HandlerFunc) *httptest.Server { return httptest.NewServer(h) }
