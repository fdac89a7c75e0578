package scrape

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/memnet"
)

// serveOn serves h on a host of its own on fab (an in-memory network, for
// a test inside a synctest bubble) and returns its URL; cleanup closes it.
func serveOn(t *testing.T, fab *memnet.Fabric, h http.HandlerFunc) string {
	t.Helper()
	ln, err := fab.Host("engine").Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// TestRunScrapesEachEngineAndToldFailuresOnce: a healthy engine, one that
// exports none of the series, one that fails a while and recovers, and
// one that hangs: each scraped on its own schedule, absent series absent,
// each failure streak told once and its end once.
//
// On the fake clock (a bubble, the engines on memnet): that the hung
// engine does not slow the others is a count in its 2 s, exact there.
func TestRunScrapesEachEngineAndToldFailuresOnce(t *testing.T) {
	synctest.Test(t, testRunScrapesEachEngineAndToldFailuresOnce)
}

func testRunScrapesEachEngineAndToldFailuresOnce(t *testing.T) {
	fab := memnet.New(1)
	var flaky atomic.Int32
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cfg := Config{
		Interval: 50 * time.Millisecond,
		Timeout:  2 * time.Second,
		Network:  fab.Host("p2pfault"),
		Targets: []Target{
			{Name: "decoder", URL: serveOn(t, fab, text(vllmText))},
			{Name: "bare", URL: serveOn(t, fab, text(noneText))},
			{Name: "flaky", URL: serveOn(t, fab, func(w http.ResponseWriter, r *http.Request) {
				// Fails its 2nd to 6th scrapes, then answers.
				if n := flaky.Add(1); n >= 2 && n <= 6 {
					http.Error(w, "engine busy", http.StatusServiceUnavailable)
					return
				}
				text(vllmText)(w, r)
			})},
			{Name: "hung", URL: serveOn(t, fab, func(w http.ResponseWriter, r *http.Request) {
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
	// The hung engine must not slow the others: the decoder is scraped on
	// its schedule, every 50 ms, while the hung engine's first scrape waits
	// out its 2 s: 40 scrapes before the give-up (at 0, 50, ... 1950 ms).
	dec := rec.of("decoder", KindScraped)
	hung := rec.of("hung", KindFailed)
	if len(hung) == 0 {
		t.Fatal("the hung engine's scrape never gave up")
	}
	// An update's At is when its scrape began: the hung one gave up a
	// timeout after its At.
	gaveUp := hung[0].At.Add(cfg.Timeout)
	before := 0
	for i, u := range dec {
		if u.At.Before(gaveUp) {
			before++
		}
		if i > 0 && u.At.Sub(dec[i-1].At) != cfg.Interval {
			t.Errorf("decoder scrape %d came %v after the one before, want %v", i, u.At.Sub(dec[i-1].At), cfg.Interval)
		}
	}
	if want := int(cfg.Timeout / cfg.Interval); before != want {
		t.Errorf("decoder scraped %d times before the hung engine's scrape gave up, want %d", before, want)
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
	if len(hung) != 1 || !strings.Contains(hung[0].Err, "no answer within 2s") || len(rec.of("hung", KindScraped)) != 0 {
		t.Errorf("hung engine: failures %+v, %d scrapes; want one 'no answer within 2s'", hung, len(rec.of("hung", KindScraped)))
	}
}
