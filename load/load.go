// Package load is p2pfault's own load generator: a fixed number of
// clients that each send one long prompt after another straight to one
// engine's /v1/completions, so that engine's scheduler is kept busy (the
// busy fault kind). It is apart from the probe's trials: its requests name
// no P2P source, are never judged, and are only counted (sent, answered,
// their latency) so a report shows the load really ran. When its context
// ends, every request in flight is cancelled and no new one is sent.
package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/netenv"
	"p2pfault/probe"
)

// Defaults of Config. Sixteen clients is what the issue that asked for
// the busy kind measured with (#55179's saturated source, tried on the
// sim); each prompt is as long as the engine's --max-model-len allows with
// one completion token, so every request is one long prefill, as the
// source ranks of #57139 were loaded.
const (
	DefaultConcurrency = 16
	DefaultMaxTokens   = 1
	// DefaultTimeout bounds one load request: a prefill of a few thousand
	// tokens takes seconds on a busy GPU, and a request that hangs longer
	// is counted as failed and sent again.
	DefaultTimeout = 60 * time.Second
)

// maxBody caps what is read of one answer: a completion of one token.
const maxBody = 1 << 20

// Config of a Generator.
type Config struct {
	URL     string         // the engine's HTTP base URL
	Model   string         // the "model" of every request
	Network netenv.Network // what requests dial through (nil: the OS's)
	// Concurrency is how many requests are in flight at once (each client
	// sends its next as soon as its last ended); 0 is DefaultConcurrency.
	Concurrency int
	// PromptTokens is each prompt's length; 0 is the longest the engine
	// allows (its max_model_len less MaxTokens, from /v1/models).
	PromptTokens int
	MaxTokens    int           // each request's max_tokens; 0 is DefaultMaxTokens
	Timeout      time.Duration // per request; 0 is DefaultTimeout
	Seed         uint64        // the prompts' token ids are drawn from it
}

// Generator sends one engine a load.
type Generator struct {
	cfg    Config
	url    string
	client *http.Client
}

// New checks cfg and fills its defaults; errors name the bad field.
func New(cfg Config) (*Generator, error) {
	switch {
	case cfg.URL == "":
		return nil, errors.New("load: no engine URL")
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("load: concurrency %d is negative", cfg.Concurrency)
	case cfg.PromptTokens < 0:
		return nil, fmt.Errorf("load: prompt length %d is negative", cfg.PromptTokens)
	case cfg.MaxTokens < 0 || cfg.Timeout < 0:
		return nil, fmt.Errorf("load: negative max_tokens %d or timeout %v", cfg.MaxTokens, cfg.Timeout)
	}
	cfg.Concurrency = or(cfg.Concurrency, DefaultConcurrency)
	cfg.MaxTokens = or(cfg.MaxTokens, DefaultMaxTokens)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	nw := netenv.Or(cfg.Network)
	if _, ok := nw.(netenv.OS); ok {
		nw = netenv.OS{Dialer: net.Dialer{Timeout: 5 * time.Second}}
	}
	return &Generator{
		cfg: cfg,
		url: strings.TrimRight(cfg.URL, "/"),
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // the engine is reached directly
			DialContext:         nw.DialContext,
			MaxIdleConnsPerHost: cfg.Concurrency,
			DisableCompression:  true,
		}},
	}, nil
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Config is the configuration in force: defaults filled, and after
// Prepare the prompt length the engine allows.
func (g *Generator) Config() Config { return g.cfg }

// Prepare asks the engine how long a prompt it takes (GET /v1/models,
// max_model_len) and fixes the prompt length: the longest it allows when
// none was asked for; an error when the one asked for does not fit.
func (g *Generator) Prepare(ctx context.Context) error {
	limit, err := g.maxModelLen(ctx)
	if err != nil {
		return err
	}
	room := limit - g.cfg.MaxTokens
	switch {
	case room < 1:
		return fmt.Errorf("its max_model_len %d leaves no room for a prompt and %d completion tokens", limit, g.cfg.MaxTokens)
	case g.cfg.PromptTokens == 0:
		g.cfg.PromptTokens = room
	case g.cfg.PromptTokens > room:
		return fmt.Errorf("a prompt of %d tokens does not fit its max_model_len %d with %d completion tokens (at most %d)",
			g.cfg.PromptTokens, limit, g.cfg.MaxTokens, room)
	}
	return nil
}

func (g *Generator) maxModelLen(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := g.url + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s answered %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&models); err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	for _, m := range models.Data {
		if m.MaxModelLen > 0 && (m.ID == g.cfg.Model || len(models.Data) == 1) {
			return m.MaxModelLen, nil
		}
	}
	return 0, fmt.Errorf("GET %s: no max_model_len for model %q", u, g.cfg.Model)
}

// Stats is what a load did so far.
type Stats struct {
	Sent      int // requests sent
	Answered  int // ... answered 200
	Failed    int // ... answered otherwise, or that failed before the end
	Cancelled int // ... in flight when the load ended, cut off
	InFlight  int // ... not ended yet
	// Latency of the answered requests.
	P50, Max time.Duration
	LastErr  string // the last failure's message
}

// Run sends the load until ctx ends: Concurrency clients, each sending its
// next request when its last ended. At ctx's end every request in flight
// is cancelled; Run returns, once each has ended, what the load did.
// progress (when set) is told the counts every interval while it runs (0:
// never), never concurrently.
func (g *Generator) Run(ctx context.Context, interval time.Duration, progress func(Stats)) Stats {
	var (
		mu  sync.Mutex
		st  Stats
		lat = check.NewHist()
	)
	snapshot := func() Stats {
		s := st
		s.P50, s.Max = lat.Quantile(50), lat.Max()
		return s
	}
	var wg sync.WaitGroup
	for c := range g.cfg.Concurrency {
		rng := rand.New(rand.NewPCG(g.cfg.Seed, uint64(c)))
		wg.Go(func() {
			for ctx.Err() == nil {
				body := g.body(rng)
				mu.Lock()
				st.Sent++
				st.InFlight++
				mu.Unlock()
				d, err := g.send(ctx, body)
				mu.Lock()
				st.InFlight--
				switch {
				case err == nil:
					st.Answered++
					lat.Record(d)
				case ctx.Err() != nil:
					st.Cancelled++
				default:
					st.Failed++
					st.LastErr = err.Error()
				}
				mu.Unlock()
				if err != nil && ctx.Err() == nil {
					// An engine that refuses at once must not be hammered
					// in a tight loop.
					pause(ctx, 100*time.Millisecond)
				}
			}
		})
	}
	if progress != nil && interval > 0 {
		done := make(chan struct{})
		var pw sync.WaitGroup
		pw.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					mu.Lock()
					s := snapshot()
					mu.Unlock()
					progress(s)
				}
			}
		})
		defer func() { close(done); pw.Wait() }()
	}
	wg.Wait()
	g.client.CloseIdleConnections()
	mu.Lock()
	defer mu.Unlock()
	return snapshot()
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// body is one request: a fresh prompt of random token ids (so no prefix
// cache makes it cheap), greedy.
func (g *Generator) body(rng *rand.Rand) []byte {
	n := g.cfg.PromptTokens
	b := make([]byte, 0, 96+len(g.cfg.Model)+7*n)
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, g.cfg.Model)
	b = append(b, `,"prompt":[`...)
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(probe.MinTokenID+rng.IntN(probe.MaxTokenID-probe.MinTokenID)), 10)
	}
	b = append(b, `],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(g.cfg.MaxTokens), 10)
	return append(b, `,"temperature":0}`...)
}

// send posts one request and says how long it took to be answered 200.
func (g *Generator) send(ctx context.Context, body []byte) (time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	start := time.Now()
	u := g.url + "/v1/completions"
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", u, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", u, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody)); err != nil {
		return 0, fmt.Errorf("POST %s: read answer: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST %s answered %s", u, resp.Status)
	}
	return time.Since(start), nil
}

// Info is the load's counts as an event carries them.
func (s Stats) Info() event.LoadCounts {
	return event.LoadCounts{Sent: s.Sent, Answered: s.Answered, Failed: s.Failed, Cancelled: s.Cancelled,
		InFlight: s.InFlight, P50: s.P50, Max: s.Max, LastErr: s.LastErr}
}
