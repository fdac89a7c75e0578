package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/netenv"

	"github.com/prometheus/common/expfmt"
)

// Defaults of Config.
const (
	DefaultInterval   = time.Second
	DefaultRateWindow = 10 * time.Second
)

// maxBody caps what is read of one /metrics answer: vLLM's is tens of KiB.
const maxBody = 8 << 20

// accept asks for the classic text format, which every vLLM serves.
const accept = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// Target is one engine to scrape.
type Target struct {
	Name string // as the run names it: source-0, decoder
	URL  string // its HTTP base URL; /metrics is appended
}

// Config of a Scraper. Zero durations take the defaults.
type Config struct {
	Targets    []Target
	Interval   time.Duration // between scrapes of one engine; 1 s
	Timeout    time.Duration // per scrape; the interval
	RateWindow time.Duration // what the live rates span; 10 s
	Client     *http.Client  // nil: a client of its own, no proxy, over Network
	// Network is what the scraper's own client dials through (with Client
	// nil): nil is the operating system's, a virtual cluster gives its
	// in-memory one. Each connect is bounded by Timeout on either.
	Network netenv.Network
}

// Kind of an Update.
type Kind string

const (
	KindScraped   Kind = "scraped"   // a scrape answered: event.Reading and event.Live are set
	KindFailed    Kind = "failed"    // the first failed scrape of a streak: Err and Message
	KindRecovered Kind = "recovered" // the engine answers again: Failures and Message, then its KindScraped
)

// Update is what Run tells of one engine.
type Update struct {
	Kind     Kind
	Engine   string
	At       time.Time     // when the scrape was sent
	Reading  event.Reading // KindScraped
	Live     event.Live    // KindScraped
	Err      string        // KindFailed: why
	Failures int           // KindRecovered: scrapes that failed in a row
	Message  string        // KindFailed, KindRecovered: a line for the user (a warning)
}

// Scraper scrapes a list of engines' /metrics.
type Scraper struct {
	cfg    Config
	client *http.Client
	own    bool // client is the scraper's own, its idle connections closed when Run ends
	urls   []string
}

// New checks cfg and fills its defaults. Errors name the bad field.
func New(cfg Config) (*Scraper, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("scrape: "+format, args...)) }
	if len(cfg.Targets) == 0 {
		bad("no engine to scrape")
	}
	seen := map[string]bool{}
	s := &Scraper{}
	for i, t := range cfg.Targets {
		if strings.TrimSpace(t.Name) == "" {
			bad("engine #%d: no name", i)
		} else if seen[t.Name] {
			bad("engine %s: named twice", t.Name)
		}
		seen[t.Name] = true
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			bad("engine %s: URL %q is not http(s)://host[:port][/path]", t.Name, t.URL)
			continue
		}
		s.urls = append(s.urls, strings.TrimRight(t.URL, "/")+"/metrics")
	}
	event.DefaultDuration(&cfg.Interval, DefaultInterval, "interval", bad)
	event.DefaultDuration(&cfg.Timeout, cfg.Interval, "timeout", bad)
	event.DefaultDuration(&cfg.RateWindow, DefaultRateWindow, "rate window", bad)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.cfg = cfg
	s.client = cfg.Client
	if s.client == nil {
		s.own = true
		s.client = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // engines are reached directly
			DialContext:         dialer(cfg.Network, cfg.Timeout),
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return s, nil
}

// dialer connects through nw (nil: the OS's) within timeout, as a
// net.Dialer with that Timeout does.
func dialer(nw netenv.Network, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if nw == nil {
		return (&net.Dialer{Timeout: timeout}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return nw.DialContext(ctx, network, addr)
	}
}

// Run scrapes every engine at once and then every Interval until ctx is
// done, each engine on its own schedule so one that hangs (a stalled
// source's /metrics never answers) delays no other. emit is never called
// concurrently. A failing engine is told once (KindFailed), not per scrape,
// and once more when it answers again (KindRecovered). Run returns when
// every scrape in flight has ended.
func (s *Scraper) Run(ctx context.Context, emit func(Update)) {
	var mu sync.Mutex
	safe := func(u Update) { mu.Lock(); defer mu.Unlock(); emit(u) }
	var wg sync.WaitGroup
	for i, t := range s.cfg.Targets {
		wg.Go(func() { s.loop(ctx, t.Name, s.urls[i], safe) })
	}
	wg.Wait()
	if s.own {
		// Nothing of the scraper outlives Run: an idle connection's
		// goroutines would (a test's synctest bubble waits for them).
		s.client.CloseIdleConnections()
	}
}

func (s *Scraper) loop(ctx context.Context, name, u string, emit func(Update)) {
	h := history{window: s.cfg.RateWindow}
	origin := time.Now()
	failures := 0
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		at := time.Now()
		r, err := s.Fetch(ctx, u)
		if ctx.Err() != nil {
			return // a scrape cut by the end of the run says nothing
		}
		switch {
		case err != nil:
			failures++
			if failures == 1 {
				emit(Update{Kind: KindFailed, Engine: name, At: at, Err: err.Error(),
					Message: fmt.Sprintf("metrics of %s: %v (told once; scrapes go on)", name, err)})
			}
		default:
			if failures > 0 {
				emit(Update{Kind: KindRecovered, Engine: name, At: at, Failures: failures,
					Message: fmt.Sprintf("metrics of %s answer again after %d failed scrapes", name, failures)})
				failures = 0
			}
			live := h.add(Point{T: at.Sub(origin), Reading: r})
			emit(Update{Kind: KindScraped, Engine: name, At: at, Reading: r, Live: live})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Fetch scrapes one /metrics URL within the configured timeout.
func (s *Scraper) Fetch(ctx context.Context, metricsURL string) (event.Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return event.Reading{}, fmt.Errorf("GET %s: %w", metricsURL, err)
	}
	req.Header.Set("Accept", accept)
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return event.Reading{}, fmt.Errorf("GET %s: no answer within %s", metricsURL, s.cfg.Timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return event.Reading{}, fmt.Errorf("GET %s: %w", metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return event.Reading{}, fmt.Errorf("GET %s: answered %s", metricsURL, resp.Status)
	}
	format := expfmt.ResponseFormat(resp.Header)
	if format.FormatType() == expfmt.TypeUnknown {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	r, err := Parse(io.LimitReader(resp.Body, maxBody), format)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return event.Reading{}, fmt.Errorf("GET %s: body not read within %s", metricsURL, s.cfg.Timeout)
		}
		return event.Reading{}, fmt.Errorf("GET %s: %w", metricsURL, err)
	}
	return r, nil
}

// FetchOnce reads one engine's /metrics once (baseURL is its HTTP base
// URL), over nw (nil: the OS's) within timeout (0: DefaultInterval), with
// a client of its own whose connections it closes before it returns.
func FetchOnce(ctx context.Context, nw netenv.Network, baseURL string, timeout time.Duration) (event.Reading, error) {
	s, err := New(Config{Targets: []Target{{Name: "engine", URL: baseURL}}, Timeout: timeout, Network: nw})
	if err != nil {
		return event.Reading{}, err
	}
	defer s.client.CloseIdleConnections()
	return s.Fetch(ctx, s.urls[0])
}
