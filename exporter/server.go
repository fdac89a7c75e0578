package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"p2pfault/event"
)

// ParseAddr reads --metrics-listen's value: HOST:PORT as given, or a bare
// PORT on the loopback (127.0.0.1:PORT), so that a soak's figures are not
// served to the network unless asked for (":PORT" is every interface).
func ParseAddr(s string) (string, error) {
	if s == "" {
		return "", errors.New("want PORT or HOST:PORT")
	}
	host, port := "127.0.0.1", s
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("want PORT or HOST:PORT with a port of 0 to 65535, not %q", port)
	}
	return net.JoinHostPort(host, port), nil
}

// Server serves an Exporter's /metrics and remembers when it was scraped,
// so that Finish can wait for the scrape that reads the run's last figures.
type Server struct {
	x   *Exporter
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup // the streams fed through Feed

	mu      sync.Mutex
	scrapes []time.Time // the last two scrapes' starts
	scraped chan struct{}
}

// Listen serves a new Exporter's /metrics on addr (ParseAddr's form).
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{x: New(), ln: ln, scraped: make(chan struct{}, 1)}
	metrics := promhttp.HandlerFor(s.x.reg, promhttp.HandlerOpts{Registry: s.x.reg})
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.scrapes = append(s.scrapes, time.Now())
		if len(s.scrapes) > 2 {
			s.scrapes = s.scrapes[1:]
		}
		s.mu.Unlock()
		metrics.ServeHTTP(w, r)
		select {
		case s.scraped <- struct{}{}:
		default:
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "p2pfault: the run's series are on /metrics\n")
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address it listens on (the port chosen for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Feed subscribes to a run's events (subscribe is its bus' Subscribe) and
// feeds them to a new stream of the Exporter until they end, in wg (the
// caller's faces). A nil Server subscribes to nothing.
func (s *Server) Feed(wg *sync.WaitGroup, subscribe func() <-chan event.Event) {
	if s == nil {
		return
	}
	ch := subscribe()
	wg.Go(func() { s.x.Run(ch) })
}

// MaxLinger bounds how long Finish waits for a last scrape.
const MaxLinger = 2 * time.Minute

// Finish serves the run's last figures until Prometheus has scraped them
// once (the scrape that begins after Finish is called), then stops
// serving. It waits as long as the scrapes so far say the next one takes
// (1.5 scrape intervals after the last scrape, plus a second), at most
// MaxLinger, and not at all when nothing ever scraped or ctx ends. It
// says so on w while waiting. A nil Server does nothing.
func (s *Server) Finish(ctx context.Context, w io.Writer) {
	if s == nil {
		return
	}
	defer s.stop()
	from := time.Now()
	s.mu.Lock()
	scrapes := append([]time.Time(nil), s.scrapes...)
	s.mu.Unlock()
	if len(scrapes) == 0 {
		return
	}
	// Drop a scrape that was already signalled: only a later one counts.
	select {
	case <-s.scraped:
	default:
	}
	wait := 15 * time.Second // one scrape seen: no interval known
	if len(scrapes) == 2 {
		gap := scrapes[1].Sub(scrapes[0])
		wait = time.Until(scrapes[1].Add(gap*3/2 + time.Second))
	}
	wait = min(max(wait, 0), MaxLinger)
	if wait == 0 {
		return
	}
	fmt.Fprintf(w, "metrics: serving the run's last figures on http://%s/metrics until the next scrape (at most %s)\n", s.Addr(), wait.Round(time.Second))
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-s.scraped:
			s.mu.Lock()
			last := s.scrapes[len(s.scrapes)-1]
			s.mu.Unlock()
			if last.After(from) {
				return
			}
		}
	}
}

// stop stops serving once the responses under way are written: the last
// scrape's handler signals before net/http has flushed its answer, and
// Close would cut that answer short, losing the run's last figures (a
// scrape Prometheus then drops). Bounded, as Finish is.
func (s *Server) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}
