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
