package probe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/memnet"
	"p2pfault/netenv"
	"p2pfault/probe"
)

// basePort is the fake P2P port of source #0; source #i is basePort+i. The
// fake decoder tells sources apart by the remote_port a pull names.
const basePort = 7777

// mode is how a fake engine answers.
type mode string

const (
	modeOK         mode = ""
	modeHang       mode = "hang"    // no answer until the client gives up
	mode500        mode = "500"     // 500 with an OpenAI-style error body
	modeGarbage    mode = "garbage" // 200 with a body that is not JSON
	modeDrop       mode = "drop"    // the connection is closed without an answer
	modeNullCached mode = "null-cached"
	modeNoUsage    mode = "no-usage"
	modeMiss       mode = "miss"     // 200, cached_tokens 0: the source never answers the lookup
	modeNegative   mode = "negative" // cached_tokens -1
	modeSlow       mode = "slow"     // answers normally after fakeCluster.slow
	modeHalfBody   mode = "half"     // 200 and half a body, then nothing
)

// request is one request a fake engine received.
type request struct {
	at     time.Time
	port   int // remote_port the pull names; 0 for a seed
	source int // list position of the source a seed went to; -1 for a pull
	body   map[string]any
	prompt string // the prompt's ids, as text, to match a seed with its pull
	header http.Header
}

// fakeCluster is a decoder and sources on 127.0.0.1 that behave like vLLM in
// P2P mode as far as the probe can tell: a pull hits when its prompt was
// seeded on the source it names.
type fakeCluster struct {
	t       testing.TB
	stop    chan struct{} // releases hung handlers before the servers close
	decoder *httptest.Server
	sources []*httptest.Server

	mu        sync.Mutex
	seedMode  map[int]mode // by source position
	pullMode  map[int]mode // by named P2P port
	missFirst int          // pulls naming a port answered as misses before the first hit
	slow      time.Duration
	seeded    map[int]map[string]bool // by P2P port
	pullCount map[int]int             // by named P2P port
	seeds     []request
	pulls     []request
	newConns  int // TCP connections the decoder accepted

	fab     *memnet.Fabric // the in-memory network the fakes serve on; nil: loopback
	network netenv.Network // the probe's, on fab; nil: the OS's
}

func newFakeCluster(t testing.TB, nSources int) *fakeCluster {
	t.Helper()
	return newFakeClusterOn(t, nSources, nil)
}

// newVirtualCluster is a fake cluster on an in-memory network (package
// memnet), for a test inside a synctest bubble: its requests arrive, and
// its pulls hang, on the bubble's fake clock, so a timing assertion is
// exact however busy the machine is. The probe dials it through the
// Network in c.config().
func newVirtualCluster(t testing.TB, nSources int) *fakeCluster {
	t.Helper()
	return newFakeClusterOn(t, nSources, memnet.New(1))
}

// newFakeClusterOn serves the fake engines on fab's hosts, or on the OS's
// loopback when fab is nil.
func newFakeClusterOn(t testing.TB, nSources int, fab *memnet.Fabric) *fakeCluster {
	t.Helper()
	c := &fakeCluster{
		t:         t,
		stop:      make(chan struct{}),
		seedMode:  map[int]mode{},
		pullMode:  map[int]mode{},
		seeded:    map[int]map[string]bool{},
		pullCount: map[int]int{},
	}
	if fab != nil {
		c.fab, c.network = fab, fab.Host("probe")
	}
	c.decoder = c.serve("decoder", http.HandlerFunc(c.serveDecoder), func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.newConns++
			c.mu.Unlock()
		}
	})
	for i := range nSources {
		s := c.serve(fmt.Sprintf("source-%d", i), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serveSource(i, w, r) }), nil)
		c.sources = append(c.sources, s)
	}
	// Cleanups run last-in first-out: hung handlers are released before the
	// servers wait for them in Close.
	t.Cleanup(func() { close(c.stop) })
	return c
}

// set changes the fake's behaviour under its lock: handlers run on the
// servers' goroutines.
// serve starts one fake engine: on loopback, or on its own host of the
// in-memory network. Cleanup closes it.
func (c *fakeCluster) serve(name string, h http.Handler, state func(net.Conn, http.ConnState)) *httptest.Server {
	c.t.Helper()
	var s *httptest.Server
	if c.fab == nil {
		s = httptest.NewUnstartedServer(h)
	} else {
		ln, err := c.fab.Host(name).Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.t.Fatalf("listen on the in-memory network: %v", err)
		}
		s = &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	}
	s.Config.ConnState = state
	s.Start()
	c.t.Cleanup(s.Close)
	return s
}

func (c *fakeCluster) set(change func()) { c.mu.Lock(); change(); c.mu.Unlock() }

func (c *fakeCluster) setSeedMode(i int, m mode) { c.mu.Lock(); c.seedMode[i] = m; c.mu.Unlock() }
func (c *fakeCluster) setPullMode(i int, m mode) {
	c.mu.Lock()
	c.pullMode[basePort+i] = m
	c.mu.Unlock()
}

// probeSources lists the fake sources for probe.Config.
func (c *fakeCluster) probeSources() []probe.Source {
	var out []probe.Source
	for i, s := range c.sources {
		out = append(out, probe.Source{Index: i, URL: s.URL, P2PHost: "127.0.0.1", P2PPort: basePort + i})
	}
	return out
}

func (c *fakeCluster) config() probe.Config {
	return probe.Config{
		DecoderURL:  c.decoder.URL,
		Sources:     c.probeSources(),
		Model:       "meta-llama/Llama-3.2-1B-Instruct",
		Interval:    20 * time.Millisecond,
		SeedTimeout: 2 * time.Second,
		PullTimeout: 5 * time.Second,
		Network:     c.network,
	}
}

func (c *fakeCluster) recorded() (seeds, pulls []request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]request(nil), c.seeds...), append([]request(nil), c.pulls...)
}

func (c *fakeCluster) connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newConns
}

func decodeRequest(r *http.Request) (map[string]any, string, error) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, "", fmt.Errorf("request body: %w", err)
	}
	ids, ok := body["prompt"].([]any)
	if !ok {
		return nil, "", fmt.Errorf("prompt is %T, not a list of token ids", body["prompt"])
	}
	var key strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&key, "%v,", id)
	}
	return body, key.String(), nil
}

func (c *fakeCluster) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-c.stop:
	}
}

func (c *fakeCluster) serveSource(i int, w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, key, err := decodeRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.seeds = append(c.seeds, request{at: at, source: i, body: body, prompt: key, header: r.Header.Clone()})
	m := c.seedMode[i]
	c.mu.Unlock()
	switch m {
	case modeHang:
		c.hang(r)
		return
	case mode500:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"source exploded","type":"InternalServerError","code":500}}`)
		return
	}
	c.mu.Lock()
	port := basePort + i
	if rank, err := strconv.Atoi(r.Header.Get(probe.RankHeader)); err == nil {
		// A seed pinned to a data-parallel rank lands in that rank's
		// tier, which listens at the source's base + rank.
		port += rank
	}
	if c.seeded[port] == nil {
		c.seeded[port] = map[string]bool{}
	}
	c.seeded[port][key] = true
	c.mu.Unlock()
	writeCompletion(w, len(body["prompt"].([]any)), 0, at)
}

func (c *fakeCluster) serveDecoder(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, key, err := decodeRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	port := 0
	if kv, ok := body["kv_transfer_params"].(map[string]any); ok {
		// A p2p pull or a PD decode leg: both name the source's port.
		for _, k := range []string{"remote_kv_source", "remote_prefiller"} {
			if src, ok := kv[k].(map[string]any); ok {
				if f, ok := src["remote_port"].(float64); ok {
					port = int(f)
				}
			}
		}
	}
	c.mu.Lock()
	c.pulls = append(c.pulls, request{at: at, port: port, source: -1, body: body, prompt: key, header: r.Header.Clone()})
	c.pullCount[port]++
	handshaking := c.pullCount[port] <= c.missFirst
	seeded := c.seeded[port][key]
	m, slow := c.pullMode[port], c.slow
	c.mu.Unlock()

	n := len(body["prompt"].([]any))
	cached := 0
	if seeded && !handshaking {
		cached = (n - 1) / 128 * 128 // whole blocks, never the whole prompt
	}
	switch m {
	case modeHang:
		c.hang(r)
	case mode500:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"decoder exploded","type":"InternalServerError","code":500}}`)
	case modeGarbage:
		fmt.Fprint(w, `<html>not json</html>`)
	case modeDrop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	case modeNullCached:
		fmt.Fprintf(w, `{"usage":{"prompt_tokens":%d,"prompt_tokens_details":{"cached_tokens":null}}}`, n)
	case modeNoUsage:
		fmt.Fprint(w, `{"id":"cmpl-1","choices":[{"text":"x"}]}`)
	case modeNegative:
		fmt.Fprintf(w, `{"usage":{"prompt_tokens":%d,"prompt_tokens_details":{"cached_tokens":-1}}}`, n)
	case modeMiss:
		writeCompletion(w, n, 0, at)
	case modeHalfBody:
		w.Header().Set("Content-Length", "1000")
		fmt.Fprint(w, `{"usage":{"prompt_tokens":`)
		_ = http.NewResponseController(w).Flush()
		c.hang(r)
	case modeSlow:
		select {
		case <-time.After(slow):
		case <-c.stop:
		}
		writeCompletion(w, n, cached, at)
	default:
		writeCompletion(w, n, cached, at)
	}
}

// writeCompletion answers like vLLM with --enable-prompt-tokens-details, and
// like the sim adds the time it spent on the request.
func writeCompletion(w http.ResponseWriter, prompt, cached int, since time.Time) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Sim-Service-Time", strconv.FormatFloat(time.Since(since).Seconds(), 'f', -1, 64))
	fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":"x","finish_reason":"length"}],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
		prompt, prompt+1, cached)
}

// closedURL is an http URL on a loopback port nothing listens on.
func closedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for a free port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// received is a sample and when the test got it.
type received struct {
	event.Sample
	at time.Time
}

// running is a (*Prober).Run in the background, its samples collected.
type running struct {
	t      testing.TB
	p      *probe.Prober
	t0     time.Time
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{}

	mu  sync.Mutex
	got []received
}

// startRun starts p.Run with t0 = now. Cleanup stops it also when the test
// fails: the schedule is cancelled and in-flight trials aborted.
func startRun(t testing.TB, p *probe.Prober) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, p: p, t0: time.Now(), cancel: cancel, done: make(chan struct{}), first: make(chan struct{})}
	out := make(chan event.Sample)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		p.Run(ctx, r.t0, out)
	}()
	go func() {
		defer close(r.done)
		var once sync.Once
		for {
			select {
			case s := <-out:
				r.mu.Lock()
				r.got = append(r.got, received{Sample: s, at: time.Now()})
				r.mu.Unlock()
				once.Do(func() { close(r.first) })
			case <-runDone:
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		p.Abort()
		<-r.done
		p.Close()
	})
	return r
}

// stop cancels the schedule and waits (at most limit) for Run to return.
func (r *running) stop(limit time.Duration) []received {
	r.t.Helper()
	r.cancel()
	return r.wait(limit)
}

func (r *running) wait(limit time.Duration) []received {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(limit):
		r.t.Fatalf("Run did not return within %s", limit)
	}
	return r.samples()
}

func (r *running) samples() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// waitSamples waits until ok holds of the samples so far: a test asks for
// the outcome it needs rather than sleeping a fixed time, which a loaded
// machine can make too short. It fails the test after 20 s.
func (r *running) waitSamples(what string, ok func([]received) bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(r.samples()) {
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s within 20s (%d samples)", what, len(r.samples()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// atLeast is a waitSamples condition: n samples have come back.
func atLeast(n int) func([]received) bool {
	return func(got []received) bool { return len(got) >= n }
}

// oneTrial runs the first trial of cfg's schedule (Interval is set long, so
// there is no second) and returns its sample.
func oneTrial(t *testing.T, cfg probe.Config) event.Sample {
	t.Helper()
	cfg.Interval = time.Hour
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	select {
	case <-r.first:
	case <-time.After(30 * time.Second):
		t.Fatal("no sample within 30s")
	}
	got := r.stop(10 * time.Second)
	if len(got) != 1 {
		t.Fatalf("got %d samples, want 1", len(got))
	}
	return got[0].Sample
}
