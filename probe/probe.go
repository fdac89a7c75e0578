// Package probe drives open-loop pull traffic through the decoder: each trial
// seeds a unique prompt on one source, then pulls it into the decoder with
// kv_transfer_params.remote_kv_source naming that source (mode p2p), or
// sends its prefill leg to the source with remote_decoder and its decode
// leg to the decoder with remote_prefiller naming it (mode pd, as vLLM's
// proxy does), and records an event.Sample. The schedule never waits for a response, so a pull that hangs for
// 30 s delays no other trial (no coordinated omission).
package probe

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"p2pfault/event"
	"p2pfault/netenv"
)

// Defaults of Config; the seed's probe sends one trial per source every 0.5 s.
const (
	DefaultInterval     = 500 * time.Millisecond
	DefaultPromptTokens = 400 // 3 blocks of 128 + 16: cached_tokens of a full hit is 384
	// A healthy seed takes ~10 ms; a stalled source must not hold the pull
	// behind it back much longer than that, so the seed gives up early.
	DefaultSeedTimeout = 1 * time.Second
	// Longer than the slowest real outcome of a pull (30 s load timeout + 10 s
	// abort-ack, reference §3), so a slow pull is measured, never cut short.
	DefaultPullTimeout = 60 * time.Second
	DefaultMaxInFlight = 256
	// The content check's default max_tokens (the command line's
	// --content-tokens): enough tokens that a wrong block shows in the text
	// (the sim's words are one of 38 each, real models' far more), few
	// enough that a decode adds little to a pull's latency.
	DefaultContentTokens = 8
)

// Token ids of prompts are drawn from [MinTokenID, MaxTokenID): valid for the
// Llama 3 vocabulary and clear of its special tokens.
const (
	MinTokenID = 1000
	MaxTokenID = 120000
)

// warnEvery rate-limits Warn: a stalled decoder can hit the in-flight cap on
// every trial, and one line a second says as much as a hundred.
const warnEvery = time.Second

// ErrAborted is the cause of trials cut short by (*Prober).Abort.
var ErrAborted = errors.New("probe aborted")

// Source is one engine the decoder pulls from.
type Source struct {
	Index   int    // reported in event.Sample.Source
	URL     string // the source's HTTP base URL, e.g. http://127.0.0.1:8100
	P2PHost string // remote_host of the pull: byte-identical to the source's configured P2P host
	P2PPort int    // remote_port of the pull (rank 0's, on a source of several ranks)
	// Ranks is the source's data-parallel size (0 or 1: one rank). Trials
	// go to its ranks in turn: each seed pinned to rank r
	// (X-data-parallel-rank: r, as vLLM's p2p_connector_proxy.py does),
	// its pull naming remote_port P2PPort+r.
	Ranks int
}

// Config of a Prober. Zero durations and counts take the defaults above.
type Config struct {
	DecoderURL string // the decoder's HTTP base URL
	// DecoderURLs are several decoders' HTTP base URLs, by index
	// (--decoders); when set, DecoderURL is ignored. Trials are spread
	// over them (decoderOf), each sample naming its own.
	DecoderURLs  []string
	Sources      []Source
	Model        string        // "model" of every request
	Interval     time.Duration // between trials of one source
	PromptTokens int           // prompt length in token ids
	SeedTimeout  time.Duration // per seed request, until the body is read
	PullTimeout  time.Duration // per pull request, until the body is read
	MaxInFlight  int           // trials in flight at once; a trial over the cap is recorded as failed
	// Stream makes each pull a streamed request (stream_options.include_usage)
	// and records its time to first token; seeds stay plain, as the proxy's.
	Stream bool
	// ContentTokens is the max_tokens of the seed and the pull, both greedy
	// with the same fields, whose texts each sample compares
	// (event.Sample.Content). 0 sends max_tokens 1, as the seed's slice,
	// and compares nothing.
	ContentTokens int
	// Mode is the leg of the tier a trial exercises: event.ModeP2P ("",
	// the default) or event.ModePD (mode.go).
	Mode string
	// Warn is told what the user should know (the in-flight cap was hit). It
	// is rate-limited and never called concurrently; it must not block long.
	Warn func(string)
	// Started, if set, is told of each pull of Run when it is sent (after
	// its seed), before its event.Sample. It is called concurrently from the
	// trials' goroutines and must not block long; the pull's clock starts
	// after it returns, so a slow Started never inflates a latency.
	Started func(event.PullStart)
	// Hold is a test's stand-in for a loaded machine (nil in a run):
	// p2pfault is held Hold(i, k) before it sends source #i's k-th trial,
	// so the trial goes that late against its slot (and the trials after
	// it wait behind it), and its answer is read as late, so its latency
	// carries the lag too, as a starved process's does (lag.go).
	Hold func(i int, k int64) time.Duration
	// Via, when set, is the P2P address ("host:port") a pull from decoder
	// names rank of source by, given the source's own (peer): a link
	// p2pfault relays the pair through (package relay). It returns peer
	// itself for no link. It is called concurrently from the trials'
	// goroutines.
	Via func(source, rank, decoder int, peer string) string
	// Network is what the probe's HTTP clients dial through: nil is the
	// operating system's (netenv.OS), a virtual cluster gives its
	// in-memory one (package memnet), whose engines have no OS address.
	Network netenv.Network
}

// Prober runs trials. Its methods are safe for concurrent use.
type Prober struct {
	cfg      Config
	decoders []*http.Client // one per decoder, aligned with cfg.DecoderURLs
	sources  []*http.Client // one per source, aligned with cfg.Sources
	pullURLs []string
	mode     strategy
	// Body fragments, encoded once: every request shares them.
	modelJSON []byte

	// addrs are the sources' addresses in force, aligned with cfg.Sources
	// (address.go); a trial holds addrMu for reading from the check of its
	// source's address to the start of its pull, Readdress for writing.
	addrMu sync.RWMutex
	addrs  []*addr

	paused atomic.Bool

	abortCtx context.Context
	abort    context.CancelCauseFunc

	rngMu sync.Mutex
	rng   *rand.Rand

	warnMu     sync.Mutex
	lastWarn   time.Time
	suppressed int

	lag lag // trials sent late against their slots (lag.go)
}

// New validates cfg, fills its defaults and returns a Prober. Connections are
// opened lazily and reused: one pool for the decoder and one per source, so
// connections hung on a stalled source never starve the others.
func New(cfg Config) (*Prober, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("probe: seed prompt generator from crypto/rand: %w", err)
	}
	modelJSON, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("probe: encode model %q: %w", cfg.Model, err)
	}
	mode, err := strategyFor(cfg.Mode)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	p := &Prober{
		cfg:       cfg,
		mode:      mode,
		modelJSON: modelJSON,
		rng:       rand.New(rand.NewChaCha8(seed)),
	}
	p.abortCtx, p.abort = context.WithCancelCause(context.Background())
	for _, u := range cfg.DecoderURLs {
		p.decoders = append(p.decoders, newClient(cfg.Network, cfg.MaxInFlight))
		p.pullURLs = append(p.pullURLs, u+"/v1/completions")
	}
	for _, s := range cfg.Sources {
		p.sources = append(p.sources, newClient(cfg.Network, cfg.MaxInFlight))
		a, err := newAddr(s, 0)
		if err != nil {
			return nil, err
		}
		p.addrs = append(p.addrs, a)
	}
	return p, nil
}

func withDefaults(cfg Config) (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("probe: "+format, args...)) }

	if len(cfg.DecoderURLs) == 0 {
		cfg.DecoderURLs = []string{cfg.DecoderURL}
	}
	decoders := make([]string, len(cfg.DecoderURLs))
	for d, raw := range cfg.DecoderURLs {
		u, err := checkBaseURL(raw)
		if err != nil && len(cfg.DecoderURLs) == 1 {
			bad("decoder URL: %w", err)
		} else if err != nil {
			bad("decoder %d URL: %w", d, err)
		}
		decoders[d] = u
	}
	cfg.DecoderURLs, cfg.DecoderURL = decoders, decoders[0]
	if strings.TrimSpace(cfg.Model) == "" {
		bad("model is empty")
	}
	if len(cfg.Sources) == 0 {
		bad("no sources to pull from")
	}
	seen := map[int]bool{}
	sources := make([]Source, len(cfg.Sources))
	for i, s := range cfg.Sources {
		name := fmt.Sprintf("source %d (#%d in the list)", s.Index, i)
		if s.Index < 0 {
			bad("%s: index is negative", name)
		}
		if seen[s.Index] {
			bad("%s: index used twice", name)
		}
		seen[s.Index] = true
		if u, err := checkBaseURL(s.URL); err != nil {
			bad("%s: URL: %w", name, err)
		} else {
			s.URL = u
		}
		if strings.TrimSpace(s.P2PHost) == "" {
			bad("%s: P2P host is empty", name)
		}
		if s.P2PPort < 1 || s.P2PPort > 65535 {
			bad("%s: P2P port %d is not in 1..65535", name, s.P2PPort)
		}
		sources[i] = s
	}
	cfg.Sources = sources

	event.DefaultDuration(&cfg.Interval, DefaultInterval, "interval", bad)
	event.DefaultDuration(&cfg.SeedTimeout, DefaultSeedTimeout, "seed timeout", bad)
	event.DefaultDuration(&cfg.PullTimeout, DefaultPullTimeout, "pull timeout", bad)
	switch {
	case cfg.PromptTokens < 0:
		bad("prompt tokens %d is negative", cfg.PromptTokens)
	case cfg.PromptTokens == 0:
		cfg.PromptTokens = DefaultPromptTokens
	}
	if cfg.ContentTokens < 0 {
		bad("content tokens %d is negative", cfg.ContentTokens)
	}
	switch {
	case cfg.MaxInFlight < 0:
		bad("max in flight %d is negative", cfg.MaxInFlight)
	case cfg.MaxInFlight == 0:
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if _, err := strategyFor(cfg.Mode); err != nil {
		bad("%w", err)
	}
	cfg.Mode = event.ModeOf(cfg.Mode)
	if cfg.Warn == nil {
		cfg.Warn = func(string) {}
	}
	return cfg, errors.Join(errs...)
}

// checkBaseURL accepts http(s)://host[:port][/path] and returns it without a
// trailing slash, so "/v1/completions" can be appended.
func checkBaseURL(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", errors.New("empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: a base URL takes no query or fragment", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// newClient is one connection pool over nw (nil: the OS's, keep-alive
// probes every 30 s as before).
func newClient(nw netenv.Network, maxConns int) *http.Client {
	if nw == nil {
		nw = netenv.OS{Dialer: net.Dialer{KeepAlive: 30 * time.Second}}
	}
	return &http.Client{Transport: &http.Transport{
		// Engines are reached directly: a proxy would add its own latency to
		// every measurement.
		Proxy:               nil,
		DialContext:         nw.DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// Config returns the configuration in force, defaults filled in; its
// Sources are the addresses in force (Readdress).
func (p *Prober) Config() Config {
	c := p.cfg
	c.Sources = p.Addresses()
	return c
}

// SetPaused stops (true) or resumes (false) starting new trials. A paused
// slot is skipped, not deferred: resuming never bursts the missed trials.
func (p *Prober) SetPaused(paused bool) { p.paused.Store(paused) }

// Paused reports whether new trials are paused.
func (p *Prober) Paused() bool { return p.paused.Load() }

// Abort ends every request in flight now (their samples say "probe aborted")
// and every later one at once; it is final. Use it when the user quits, so
// Run does not wait out hung pulls.
func (p *Prober) Abort() { p.abort(ErrAborted) }

// Close releases idle connections. Call it once Run and Warmup returned.
func (p *Prober) Close() {
	for _, c := range append(p.decoders, p.sources...) {
		c.CloseIdleConnections()
	}
}

// Run sends trials until ctx is done, then waits for the trials in flight
// (up to their timeouts, or Abort) and returns. Trial n (counting all
// sources) is scheduled at t0 + n×Interval/len(Sources): source #i of the
// list gets trials i, i+N, i+2N, ..., so sources are phased Interval/N apart
// and never burst together. A trial late on its slot (a busy machine) starts
// at once. Every scheduled trial yields exactly one event.Sample on out, also when
// the in-flight cap was hit, except slots skipped while paused. Run does not
// close out; the caller must keep receiving until Run returns. Call Run once
// per measured run: trial numbers start at 0 each time.
func (p *Prober) Run(ctx context.Context, t0 time.Time, out chan<- event.Sample) {
	// Trials in flight outlive ctx (they end on their own timeouts) but not
	// Abort.
	reqCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(p.abortCtx, func() { cancel(context.Cause(p.abortCtx)) })
	defer stop()

	slots := make(chan struct{}, p.cfg.MaxInFlight)
	var wg sync.WaitGroup
	for i := range p.cfg.Sources {
		wg.Go(func() { p.schedule(ctx, reqCtx, t0, i, slots, &wg, out) })
	}
	wg.Wait()
	p.flushWarnings()
}

func (p *Prober) schedule(ctx, reqCtx context.Context, t0 time.Time, i int, slots chan struct{}, wg *sync.WaitGroup, out chan<- event.Sample) {
	n := int64(len(p.cfg.Sources))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := int64(0); ; k++ {
		trial := k*n + int64(i)
		at := t0.Add(time.Duration(trial) * p.cfg.Interval / time.Duration(n))
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		// select picks at random when the timer and ctx are both ready: no
		// trial may start once ctx is done.
		if ctx.Err() != nil {
			return
		}
		if p.paused.Load() {
			continue
		}
		held := p.hold(ctx, i, k)
		late := time.Since(at)
		p.lag.note(late, p.cfg.Warn)
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				s, _ := p.trial(reqCtx, t0, pair{i, RankOf(k, p.cfg.Sources[i].rankCount()), p.decoderOf(i, k)}, trial, p.cfg.Started)
				<-slots // the requests are over: free the slot before a slow receiver can hold it
				s.Late = lateOf(late)
				s.Latency += held
				out <- s
			})
		default:
			s := p.capHit(t0, i, k, trial)
			s.Late = lateOf(late)
			wg.Go(func() { out <- s })
		}
	}
}

// decoderOf is the decoder of source #i's k-th trial: its trials go to
// the decoders in turn, and source #i starts at decoder i, so at every
// round the sources' pulls are spread over the decoders too and each
// decoder↔source pair is probed every len(DecoderURLs) rounds.
func (p *Prober) decoderOf(i int, k int64) int {
	return int((k + int64(i)) % int64(len(p.cfg.DecoderURLs)))
}

// capHit records a trial that was not sent because MaxInFlight requests were
// in flight: a failed sample, never a silent gap in the schedule.
func (p *Prober) capHit(t0 time.Time, i int, k, trial int64) event.Sample {
	msg := fmt.Sprintf("not sent: %d requests in flight (max-in-flight %d)", p.cfg.MaxInFlight, p.cfg.MaxInFlight)
	p.warnMu.Lock()
	defer p.warnMu.Unlock()
	now := time.Now()
	if p.lastWarn.IsZero() || now.Sub(p.lastWarn) >= warnEvery {
		w := fmt.Sprintf("probe: %d requests in flight hit the cap (max-in-flight %d): trials are recorded as failed", p.cfg.MaxInFlight, p.cfg.MaxInFlight)
		if p.suppressed > 0 {
			w += fmt.Sprintf("; %d more since the last warning", p.suppressed)
		}
		p.cfg.Warn(w)
		p.lastWarn, p.suppressed = now, 0
	} else {
		p.suppressed++
	}
	return event.Sample{
		Source:       p.cfg.Sources[i].Index,
		Rank:         RankOf(k, p.cfg.Sources[i].rankCount()),
		Decoder:      p.decoderOf(i, k),
		Trial:        trial,
		SeedErr:      msg,
		Start:        now.Sub(t0),
		PromptTokens: p.cfg.PromptTokens,
		Err:          msg,
	}
}

// flushWarnings reports cap hits that the rate limit held back, so the last
// second of a run is not left unsaid.
func (p *Prober) flushWarnings() {
	p.warnMu.Lock()
	defer p.warnMu.Unlock()
	if p.suppressed > 0 {
		p.cfg.Warn(fmt.Sprintf("probe: %d more trials hit the in-flight cap (max-in-flight %d) since the last warning", p.suppressed, p.cfg.MaxInFlight))
		p.suppressed = 0
	}
}
