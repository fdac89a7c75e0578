package probe_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"p2pfault/probe"
)

func TestNewRejectsBadConfig(t *testing.T) {
	good := func() probe.Config {
		return probe.Config{
			DecoderURL: "http://127.0.0.1:8200",
			Sources: []probe.Source{
				{Index: 0, URL: "http://127.0.0.1:8100", P2PHost: "127.0.0.1", P2PPort: 7777},
				{Index: 1, URL: "http://127.0.0.1:8101/", P2PHost: "127.0.0.1", P2PPort: 7778},
			},
			Model: "m",
		}
	}
	tests := []struct {
		name   string
		change func(*probe.Config)
		want   []string // every one must be in the error
	}{
		{"empty decoder URL", func(c *probe.Config) { c.DecoderURL = "" }, []string{"decoder URL", "empty"}},
		{"decoder URL without scheme", func(c *probe.Config) { c.DecoderURL = "127.0.0.1:8200" }, []string{"decoder URL", "127.0.0.1:8200"}},
		{"decoder URL with ftp scheme", func(c *probe.Config) { c.DecoderURL = "ftp://h:1" }, []string{"decoder URL", "scheme must be http or https"}},
		{"decoder URL with a query", func(c *probe.Config) { c.DecoderURL = "http://h:1/?x=1" }, []string{"decoder URL", "no query"}},
		{"no model", func(c *probe.Config) { c.Model = " " }, []string{"model is empty"}},
		{"no sources", func(c *probe.Config) { c.Sources = nil }, []string{"no sources"}},
		{"source URL without host", func(c *probe.Config) { c.Sources[1].URL = "http://" }, []string{"source 1", "no host"}},
		{"negative source index", func(c *probe.Config) { c.Sources[0].Index = -1 }, []string{"source -1", "negative"}},
		{"index used twice", func(c *probe.Config) { c.Sources[1].Index = 0 }, []string{"source 0 (#1", "used twice"}},
		{"empty P2P host", func(c *probe.Config) { c.Sources[0].P2PHost = "" }, []string{"source 0", "P2P host is empty"}},
		{"P2P port out of range", func(c *probe.Config) { c.Sources[1].P2PPort = 70000 }, []string{"source 1", "P2P port 70000"}},
		{"zero P2P port", func(c *probe.Config) { c.Sources[1].P2PPort = 0 }, []string{"source 1", "P2P port 0"}},
		{"negative interval", func(c *probe.Config) { c.Interval = -time.Second }, []string{"interval -1s"}},
		{"negative seed timeout", func(c *probe.Config) { c.SeedTimeout = -1 }, []string{"seed timeout"}},
		{"negative pull timeout", func(c *probe.Config) { c.PullTimeout = -1 }, []string{"pull timeout"}},
		{"negative prompt tokens", func(c *probe.Config) { c.PromptTokens = -3 }, []string{"prompt tokens -3"}},
		{"negative max in flight", func(c *probe.Config) { c.MaxInFlight = -1 }, []string{"max in flight -1"}},
		{"every problem at once", func(c *probe.Config) { c.Model = ""; c.Interval = -1 }, []string{"model is empty", "interval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.change(&cfg)
			p, err := probe.New(cfg)
			if err == nil {
				p.Close()
				t.Fatal("New accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	t.Run("defaults fill zero values", func(t *testing.T) {
		p, err := probe.New(good())
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer p.Close()
		c := p.Config()
		if c.Interval != probe.DefaultInterval || c.PromptTokens != probe.DefaultPromptTokens ||
			c.SeedTimeout != probe.DefaultSeedTimeout || c.PullTimeout != probe.DefaultPullTimeout ||
			c.MaxInFlight != probe.DefaultMaxInFlight {
			t.Errorf("defaults not applied: %+v", c)
		}
		if c.Sources[1].URL != "http://127.0.0.1:8101" {
			t.Errorf("trailing slash kept: %q", c.Sources[1].URL)
		}
	})
}

func TestTrialRecordsWhatThePullGot(t *testing.T) {
	const prompt = 400
	tests := []struct {
		name        string
		seed        mode
		seedRefused bool
		pull        mode
		decoderDown bool
		seedTimeout time.Duration
		pullTimeout time.Duration

		wantSeedStatus int
		wantSeedErr    string
		wantStatus     int
		wantCached     int
		wantErr        string // "" means no error
		wantService    bool   // ServiceTime comes from the header
		minLatency     time.Duration
	}{
		{name: "seeded prompt hits with whole blocks cached", wantSeedStatus: 200, wantStatus: 200, wantCached: 384, wantService: true},
		{name: "source never saw the prompt: miss", pull: modeMiss, wantSeedStatus: 200, wantStatus: 200, wantCached: 0, wantService: true},
		{name: "decoder 500 is an error with its message", pull: mode500, wantSeedStatus: 200, wantStatus: 500, wantErr: "decoder answered 500 Internal Server Error: decoder exploded"},
		{name: "decoder not listening is an error", decoderDown: true, wantSeedStatus: 200, wantStatus: 0, wantErr: "connection refused"},
		{name: "body that is not JSON is an error naming it", pull: modeGarbage, wantSeedStatus: 200, wantStatus: 200, wantErr: `not valid JSON`},
		{name: "connection closed without an answer is an error", pull: modeDrop, wantSeedStatus: 200, wantStatus: 0, wantErr: "EOF"},
		{name: "pull hanging past its timeout is an error naming it", pull: modeHang, pullTimeout: 150 * time.Millisecond,
			wantSeedStatus: 200, wantStatus: 0, wantErr: "no answer within 150ms (timeout)", minLatency: 150 * time.Millisecond},
		{name: "body stalling past the timeout keeps the status", pull: modeHalfBody, pullTimeout: 150 * time.Millisecond,
			wantSeedStatus: 200, wantStatus: 200, wantErr: "answered 200 but the body was not read within 150ms (timeout)", minLatency: 150 * time.Millisecond},
		{name: "null cached_tokens counts as zero", pull: modeNullCached, wantSeedStatus: 200, wantStatus: 200, wantCached: 0},
		{name: "no usage counts as zero", pull: modeNoUsage, wantSeedStatus: 200, wantStatus: 200, wantCached: 0},
		{name: "negative cached_tokens is an error", pull: modeNegative, wantSeedStatus: 200, wantStatus: 200, wantErr: "cached_tokens -1, which is negative"},
		{name: "seed answered 500: pull still sent, misses", seed: mode500, wantSeedStatus: 500,
			wantSeedErr: "source answered 500 Internal Server Error: source exploded", wantStatus: 200, wantCached: 0, wantService: true},
		{name: "seed refused: pull still sent, misses", seedRefused: true, wantSeedStatus: 0,
			wantSeedErr: "connection refused", wantStatus: 200, wantCached: 0, wantService: true},
		{name: "seed timed out: pull still sent, misses", seed: modeHang, seedTimeout: 150 * time.Millisecond, wantSeedStatus: 0,
			wantSeedErr: "no answer within 150ms (timeout)", wantStatus: 200, wantCached: 0, wantService: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 1)
			c.setSeedMode(0, tt.seed)
			c.setPullMode(0, tt.pull)
			cfg := c.config()
			cfg.PromptTokens = prompt
			if tt.seedRefused {
				cfg.Sources[0].URL = closedURL(t)
			}
			if tt.decoderDown {
				cfg.DecoderURL = closedURL(t)
			}
			if tt.seedTimeout > 0 {
				cfg.SeedTimeout = tt.seedTimeout
			}
			if tt.pullTimeout > 0 {
				cfg.PullTimeout = tt.pullTimeout
			}
			s := oneTrial(t, cfg)

			if s.Source != 0 || s.Trial != 0 {
				t.Errorf("source %d trial %d, want 0 0", s.Source, s.Trial)
			}
			if s.SeedStatus != tt.wantSeedStatus {
				t.Errorf("SeedStatus %d, want %d (SeedErr %q)", s.SeedStatus, tt.wantSeedStatus, s.SeedErr)
			}
			if (tt.wantSeedErr == "") != (s.SeedErr == "") || !strings.Contains(s.SeedErr, tt.wantSeedErr) {
				t.Errorf("SeedErr %q, want %q", s.SeedErr, tt.wantSeedErr)
			}
			if s.Status != tt.wantStatus {
				t.Errorf("Status %d, want %d (Err %q)", s.Status, tt.wantStatus, s.Err)
			}
			if (tt.wantErr == "") != (s.Err == "") || !strings.Contains(s.Err, tt.wantErr) {
				t.Errorf("Err %q, want %q", s.Err, tt.wantErr)
			}
			if s.CachedTokens != tt.wantCached {
				t.Errorf("CachedTokens %d, want %d", s.CachedTokens, tt.wantCached)
			}
			if s.Hit() != (tt.wantCached > 0) {
				t.Errorf("Hit() = %v with cached %d", s.Hit(), s.CachedTokens)
			}
			if s.PromptTokens != prompt {
				t.Errorf("PromptTokens %d, want %d", s.PromptTokens, prompt)
			}
			if tt.wantService && (s.ServiceTime <= 0 || s.ServiceTime > s.Latency) {
				t.Errorf("ServiceTime %s, want in (0, latency %s]", s.ServiceTime, s.Latency)
			}
			if s.Latency < tt.minLatency || s.Latency > tt.minLatency+3*time.Second {
				t.Errorf("Latency %s, want in [%s, %s]", s.Latency, tt.minLatency, tt.minLatency+3*time.Second)
			}
			// The pull leaves after the seed is over, whatever its outcome.
			if s.Start < s.SeedLatency {
				t.Errorf("pull started at %s, before the seed ended (%s)", s.Start, s.SeedLatency)
			}
			if _, pulls := c.recorded(); !tt.decoderDown && len(pulls) != 1 {
				t.Errorf("decoder got %d pulls, want 1", len(pulls))
			}
		})
	}
}

func TestRequestsHaveTheDocumentedShape(t *testing.T) {
	c := newFakeCluster(t, 2)
	cfg := c.config()
	cfg.PromptTokens = 300
	cfg.Sources[1].P2PHost = "localhost" // passed through verbatim: vLLM matches the literal host:port
	// Every request reaches its server however slow a loaded machine
	// makes it: a request given up before it arrived would break the
	// count of one seed and one pull per sample.
	cfg.SeedTimeout, cfg.PullTimeout = time.Minute, time.Minute
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	r.waitSamples("6 samples", atLeast(6))
	got := r.stop(10 * time.Second)
	seeds, pulls := c.recorded()
	if len(got) < 6 || len(pulls) != len(got) || len(seeds) != len(got) {
		t.Fatalf("%d samples, %d pulls, %d seeds: want the same number, at least 6", len(got), len(pulls), len(seeds))
	}

	seedByPrompt := map[string]request{}
	for _, s := range seeds {
		if _, dup := seedByPrompt[s.prompt]; dup {
			t.Errorf("prompt seeded twice: prompts must be unique per trial")
		}
		seedByPrompt[s.prompt] = s
		keys := slices.Sorted(maps.Keys(s.body))
		if want := []string{"max_tokens", "model", "prompt", "temperature"}; !slices.Equal(keys, want) {
			t.Errorf("seed body keys %v, want %v", keys, want)
		}
	}
	ids := map[string]bool{}
	for _, pl := range pulls {
		seed, ok := seedByPrompt[pl.prompt]
		if !ok {
			t.Errorf("pull naming port %d carries a prompt no source was seeded with", pl.port)
			continue
		}
		if want := basePort + seed.source; pl.port != want {
			t.Errorf("pull names port %d, its prompt was seeded on source %d (port %d)", pl.port, seed.source, want)
		}
		if pl.body["model"] != cfg.Model || pl.body["max_tokens"] != 1.0 || pl.body["temperature"] != 0.0 {
			t.Errorf("pull body model/max_tokens/temperature = %v/%v/%v", pl.body["model"], pl.body["max_tokens"], pl.body["temperature"])
		}
		prompt := pl.body["prompt"].([]any)
		if len(prompt) != 300 {
			t.Errorf("prompt of %d tokens, want 300", len(prompt))
		}
		for _, id := range prompt {
			if f := id.(float64); f < probe.MinTokenID || f >= probe.MaxTokenID || f != float64(int(f)) {
				t.Errorf("token id %v outside [%d, %d)", f, probe.MinTokenID, probe.MaxTokenID)
				break
			}
		}
		src := pl.body["kv_transfer_params"].(map[string]any)["remote_kv_source"].(map[string]any)
		id, err := uuid.Parse(src["kv_request_id"].(string))
		if err != nil || id.Version() != 4 {
			t.Errorf("kv_request_id %q is not a uuid4 (%v)", src["kv_request_id"], err)
		}
		if ids[id.String()] {
			t.Errorf("kv_request_id %s used twice", id)
		}
		ids[id.String()] = true
		if want := cfg.Sources[seed.source].P2PHost; src["remote_host"] != want {
			t.Errorf("remote_host %v, want %q", src["remote_host"], want)
		}
	}
}

// TestHungPullsDelayNoOtherTrial is the no-coordinated-omission property: a
// decoder that never answers pulls naming source 0 (a stalled source) must
// not slow the schedule of source 0's trials nor delay source 1's. It runs
// on the fake clock (a bubble, the fake cluster on memnet): the fake answers
// in no time there, so every count and every delay is exact, and a busy
// machine cannot move a pull across the window's edges.
func TestHungPullsDelayNoOtherTrial(t *testing.T) {
	synctest.Test(t, testHungPullsDelayNoOtherTrial)
}

func testHungPullsDelayNoOtherTrial(t *testing.T) {
	const (
		interval = 50 * time.Millisecond
		window   = 1500 * time.Millisecond // 30 intervals
	)
	c := newVirtualCluster(t, 2)
	c.setPullMode(0, modeHang)
	cfg := c.config()
	cfg.Interval = interval
	cfg.PullTimeout = time.Minute // outlives the test: every pull naming source 0 stays in flight
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	// The window's edges sit halfway between source 0's slots (0, 50, 100 ms
	// ...), on source 1's.
	from := r.t0.Add(200*time.Millisecond + interval/2)
	to := from.Add(window)
	time.Sleep(time.Until(to))
	synctest.Wait() // every trial due before the window's end has come back
	early := r.samples()
	p.Abort()
	got := r.stop(10 * time.Second)

	_, pulls := c.recorded()
	sent0 := 0
	for _, pl := range pulls {
		if pl.port == basePort && !pl.at.Before(from) && pl.at.Before(to) {
			sent0++
		}
	}
	want := int(window / interval)
	if sent0 != want {
		t.Errorf("pulls naming hung source 0 sent in %s: %d, want %d", window, sent0, want)
	}

	var on1 int
	for _, s := range early {
		if s.Source == 0 {
			t.Fatalf("a pull naming source 0 came back before the abort: %+v", s.Sample)
		}
		slot := r.t0.Add(time.Duration(s.Trial) * interval / 2)
		if slot.Before(from) || !slot.Before(to) {
			continue
		}
		on1++
		if !s.Hit() {
			t.Errorf("source 1 trial %d did not hit: status %d cached %d err %q", s.Trial, s.Status, s.CachedTokens, s.Err)
		}
		// The fake answers in no time on the fake clock: any delay is
		// the probe's.
		if late := s.at.Sub(slot); late != 0 {
			t.Errorf("source 1 trial %d came back %s after its slot", s.Trial, late)
		}
	}
	if on1 != want {
		t.Errorf("source 1 completed %d trials scheduled in the window, want %d", on1, want)
	}

	aborted := 0
	for _, s := range got {
		cut := strings.Contains(s.Err, probe.ErrAborted.Error())
		if s.Source == 0 && cut {
			aborted++
		}
		if s.Aborted != cut {
			t.Errorf("trial %d: Aborted %v with error %q: the flag must mark exactly the pulls the abort cut", s.Trial, s.Aborted, s.Err)
		}
	}
	if aborted < want {
		t.Errorf("%d pulls naming source 0 ended by the abort, want at least the %d of the window", aborted, want)
	}
}

// TestEveryScheduledTrialYieldsOneSample runs on the fake clock: each trial
// leaves exactly at its slot, and the run's length bounds the count exactly.
func TestEveryScheduledTrialYieldsOneSample(t *testing.T) {
	synctest.Test(t, testEveryScheduledTrialYieldsOneSample)
}

func testEveryScheduledTrialYieldsOneSample(t *testing.T) {
	const (
		interval = 60 * time.Millisecond
		sources  = 3
	)
	c := newVirtualCluster(t, sources)
	cfg := c.config()
	cfg.Interval = interval
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	r.waitSamples("45 samples", atLeast(45))
	got := r.stop(10 * time.Second)
	stopped := time.Since(r.t0)
	trials := map[int64]bool{}
	last := map[int]int64{}
	for _, s := range got {
		if trials[s.Trial] {
			t.Errorf("trial %d recorded twice", s.Trial)
		}
		trials[s.Trial] = true
		last[s.Source] = max(last[s.Source], s.Trial)
		if want := int(s.Trial % sources); s.Source != want {
			t.Errorf("trial %d names source %d, want %d (trial n is source n mod %d)", s.Trial, s.Source, want, sources)
		}
		// Trial n is due at n×interval/sources and leaves then, after a
		// seed that takes no time on the fake clock.
		if slot := time.Duration(s.Trial) * interval / sources; s.Start != slot || s.SeedLatency != 0 {
			t.Errorf("trial %d pulled at %s, slot %s, after a seed of %s", s.Trial, s.Start, slot, s.SeedLatency)
		}
		if !s.Hit() {
			t.Errorf("trial %d missed: %+v", s.Trial, s)
		}
	}
	// Each source stops on its own when the run is cancelled; up to its
	// last trial, none is missing.
	for src, n := range last {
		for k := int64(src); k <= n; k += sources {
			if !trials[k] {
				t.Errorf("source %d: trial %d missing before its last, %d", src, k, n)
			}
		}
	}
	// No trial starts before its slot nor after the stop: exactly the
	// slots due by then (0 included).
	if want := int(stopped*sources/interval) + 1; len(got) != want {
		t.Errorf("%d trials in %v at %d sources × %s, want %d", len(got), stopped, sources, interval, want)
	}
}

// TestInFlightCapRecordsFailedSamplesAndWarns runs on the fake clock: how
// many warnings the rate limit lets out depends on how long the run took.
func TestInFlightCapRecordsFailedSamplesAndWarns(t *testing.T) {
	synctest.Test(t, testInFlightCapRecordsFailedSamplesAndWarns)
}

func testInFlightCapRecordsFailedSamplesAndWarns(t *testing.T) {
	const interval = 10 * time.Millisecond
	c := newVirtualCluster(t, 1)
	c.setPullMode(0, modeHang)
	cfg := c.config()
	cfg.Interval = interval
	cfg.MaxInFlight = 3
	cfg.PullTimeout = time.Minute
	var mu sync.Mutex
	var warnings []string
	cfg.Warn = func(s string) { mu.Lock(); warnings = append(warnings, s); mu.Unlock() }
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	// 2.505 s: slots 0 to 2.5 s, the last 248 over the cap (trials 0-2 hang
	// in flight); the stop falls between slots.
	const ran, trials, capHits = 2505 * time.Millisecond, 251, 248
	time.Sleep(time.Until(r.t0.Add(ran)))
	synctest.Wait()
	r.cancel()
	p.Abort()
	got := r.wait(10 * time.Second)

	capped, aborted := 0, 0
	seen := map[int64]bool{}
	for _, s := range got {
		seen[s.Trial] = true
		switch {
		case strings.Contains(s.Err, "not sent: 3 requests in flight (max-in-flight 3)"):
			capped++
			if s.Status != 0 || s.Hit() {
				t.Errorf("capped trial %d has status %d", s.Trial, s.Status)
			}
		case strings.Contains(s.Err, "probe aborted"):
			aborted++
		default:
			t.Errorf("trial %d: unexpected Err %q", s.Trial, s.Err)
		}
	}
	// A trial let in after the abort fails before it sends anything, so the
	// decoder's count is the cap's proof.
	if _, pulls := c.recorded(); len(pulls) != 3 {
		t.Errorf("decoder got %d pulls, want the cap, 3", len(pulls))
	}
	if aborted != 3 {
		t.Errorf("%d trials ended by the abort, want the 3 in flight", aborted)
	}
	if capped != capHits || len(got) != trials {
		t.Errorf("%d trials recorded over the cap of %d, want %d of %d", capped, len(got), capHits, trials)
	}
	for n := range int64(len(got)) {
		if !seen[n] {
			t.Errorf("trial %d has no sample: a capped trial must not be dropped", n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// One at the first hit (30 ms), one a second after each (1.03 s,
	// 2.03 s), one for the rest when Run ended: rate-limited, not one per
	// capped trial.
	if len(warnings) != 4 {
		t.Errorf("%d warnings for %d capped trials in %v, want 4: %q", len(warnings), capped, ran, warnings)
	}
	if len(warnings) > 0 && !strings.Contains(warnings[0], "max-in-flight 3") {
		t.Errorf("warning %q does not name the cap", warnings[0])
	}
}

// TestPausedSlotsAreSkippedNotBurst runs on the fake clock: the pause and
// the resume fall between slots, so exactly the slots between them are
// skipped and none is replayed.
func TestPausedSlotsAreSkippedNotBurst(t *testing.T) {
	synctest.Test(t, testPausedSlotsAreSkippedNotBurst)
}

func testPausedSlotsAreSkippedNotBurst(t *testing.T) {
	const (
		interval = 20 * time.Millisecond
		// Halfway between slots: a slot and a pause at one instant of the
		// fake clock would be taken in either order.
		pausedAt, resumedAt, stoppedAt = 210 * time.Millisecond, 510 * time.Millisecond, 570 * time.Millisecond
	)
	c := newVirtualCluster(t, 1)
	cfg := c.config()
	cfg.Interval = interval
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	sleepTo := func(d time.Duration) { time.Sleep(time.Until(r.t0.Add(d))); synctest.Wait() }
	sleepTo(pausedAt)
	p.SetPaused(true)
	if !p.Paused() {
		t.Error("Paused() = false after SetPaused(true)")
	}
	sleepTo(resumedAt)
	p.SetPaused(false)
	sleepTo(stoppedAt)
	got := r.stop(10 * time.Second)

	// A slot is due at Trial×interval: a missed slot replayed after resuming
	// would carry a number from the paused stretch.
	var want, ran []int64
	for k := int64(0); time.Duration(k)*interval < stoppedAt; k++ {
		if slot := time.Duration(k) * interval; slot < pausedAt || slot > resumedAt {
			want = append(want, k)
		}
	}
	for _, s := range got {
		ran = append(ran, s.Trial)
	}
	slices.Sort(ran)
	if !slices.Equal(ran, want) {
		t.Errorf("trials %v ran, paused from %s to %s at %s a slot; want %v: paused slots are skipped, not replayed", ran, pausedAt, resumedAt, interval, want)
	}
}

func TestRunWaitsForTrialsInFlight(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setPullMode(0, modeSlow)
	c.set(func() { c.slow = 400 * time.Millisecond })
	cfg := c.config()
	cfg.Interval = time.Hour
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	waitFor(t, func() bool { _, pulls := c.recorded(); return len(pulls) == 1 })
	got := r.stop(10 * time.Second)
	// From when the decoder got the pull, not from the cancel: this test
	// may notice the pull late, and the answer comes 400 ms after it.
	_, pulls := c.recorded()
	if took := time.Since(pulls[0].at); took < 400*time.Millisecond {
		t.Errorf("Run returned %s after the decoder got its pull, before the pull (400ms) was answered", took)
	}
	if len(got) != 1 || !got[0].Hit() {
		t.Fatalf("want the one in-flight trial recorded as a hit, got %+v", got)
	}
}

func TestAbortEndsHungTrialsAtOnce(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setPullMode(0, modeHang)
	cfg := c.config()
	cfg.Interval = time.Hour
	cfg.PullTimeout = time.Minute
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	waitFor(t, func() bool { _, pulls := c.recorded(); return len(pulls) == 1 })
	r.cancel()
	p.Abort()
	got := r.wait(5 * time.Second) // far below the minute the pull would wait
	if len(got) != 1 || got[0].Status != 0 || !strings.Contains(got[0].Err, "probe aborted") {
		t.Fatalf("want one sample failed with %q, got %+v", probe.ErrAborted, got)
	}
}

// TestConnectionsAreReused runs on the fake clock, where the fake answers
// each pull before the next is due: one connection serves every pull.
func TestConnectionsAreReused(t *testing.T) {
	synctest.Test(t, testConnectionsAreReused)
}

func testConnectionsAreReused(t *testing.T) {
	c := newVirtualCluster(t, 1)
	cfg := c.config()
	cfg.Interval = 30 * time.Millisecond
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	r.waitSamples("20 samples", atLeast(20))
	got := r.stop(10 * time.Second)
	// A pool needs at most as many connections as pulls overlap: here
	// none do. One connection per pull means no reuse.
	if overlap, n := maxOverlap(got), c.connections(); overlap != 1 || n != 1 {
		t.Errorf("%d pulls (at most %d at once) opened %d connections to the decoder, want 1", len(got), overlap, n)
	}
}

// maxOverlap is the most pulls in flight at once.
func maxOverlap(got []received) int {
	type edge struct {
		at time.Duration
		d  int
	}
	var edges []edge
	for _, s := range got {
		edges = append(edges, edge{s.Start, 1}, edge{s.End(), -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return b.d - a.d // a start and an end at the same instant overlap
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.d
		peak = max(peak, cur)
	}
	return peak
}

func TestWarmup(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(c *fakeCluster, cfg *probe.Config)
		timeout   time.Duration
		wantErr   []string // all in the error; nil: success
		notInErr  string
		minPulls0 int // pulls naming source 0 the decoder must have seen
	}{
		{name: "every source hits at once", timeout: 5 * time.Second, minPulls0: 1},
		{
			name:      "retries until the session is handshaken",
			setup:     func(c *fakeCluster, _ *probe.Config) { c.set(func() { c.missFirst = 3 }) },
			timeout:   5 * time.Second,
			minPulls0: 4,
		},
		{
			name:     "a source that never hits times out, named",
			setup:    func(c *fakeCluster, _ *probe.Config) { c.setPullMode(1, modeMiss) },
			timeout:  400 * time.Millisecond,
			wantErr:  []string{"source 1 (P2P 127.0.0.1:7778) not handshaken within 400ms", "pull answered 200 with cached_tokens 0"},
			notInErr: "source 0",
		},
		{
			name:    "a source whose pulls hang times out, named",
			setup:   func(c *fakeCluster, _ *probe.Config) { c.setPullMode(0, modeHang) },
			timeout: 400 * time.Millisecond,
			wantErr: []string{"source 0 (P2P 127.0.0.1:7777)", "no answer before the warm-up deadline"},
		},
		{
			name:    "a refused seed is named in the last failure",
			setup:   func(c *fakeCluster, cfg *probe.Config) { cfg.Sources[1].URL = "http://127.0.0.1:1" }, // nothing listens on the in-memory network's port 1
			timeout: 400 * time.Millisecond,
			wantErr: []string{"source 1", "cached_tokens 0 after the seed failed", "connection refused"},
		},
		{
			name:    "a decoder without prompt token details hints at the flag",
			setup:   func(c *fakeCluster, _ *probe.Config) { c.setPullMode(0, modeNoUsage); c.setPullMode(1, modeNoUsage) },
			timeout: 400 * time.Millisecond,
			wantErr: []string{"source 0", "source 1", "--enable-prompt-tokens-details"},
		},
	}
	// Each case on the fake clock (a bubble, the fakes on memnet): a
	// warm-up's retries and its deadline are exact there.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newVirtualCluster(t, 2)
				cfg := c.config()
				if tt.setup != nil {
					tt.setup(c, &cfg)
				}
				p, err := probe.New(cfg)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				t.Cleanup(p.Close)
				start := time.Now()
				err = p.Warmup(context.Background(), tt.timeout)
				took := time.Since(start)
				if tt.wantErr == nil {
					if err != nil {
						t.Fatalf("Warmup: %v", err)
					}
					if took >= tt.timeout {
						t.Errorf("Warmup took %s with a %s timeout", took, tt.timeout)
					}
				} else {
					if err == nil {
						t.Fatal("Warmup succeeded")
					}
					t.Logf("Warmup: %v", err)
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("error %q does not wrap context.DeadlineExceeded", err)
					}
					if took != tt.timeout {
						t.Errorf("Warmup gave up after %s, want at its %s timeout", took, tt.timeout)
					}
					for _, w := range tt.wantErr {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error %q does not contain %q", err, w)
						}
					}
					if tt.notInErr != "" && strings.Contains(err.Error(), tt.notInErr) {
						t.Errorf("error %q names %q, which warmed up", err, tt.notInErr)
					}
					// Each source the error names is a NotWarm with its last
					// attempt, for the experiment's gate.
					nws := probe.NotWarmOf(err)
					if len(nws) == 0 {
						t.Errorf("no NotWarm in %q", err)
					}
					for _, nw := range nws {
						if !strings.Contains(err.Error(), fmt.Sprintf("source %d (P2P %s)", nw.Source, nw.Peer)) {
							t.Errorf("NotWarm %+v is not named in %q", nw, err)
						}
						if strings.Contains(nw.Error(), "after the seed failed") != (nw.Last.SeedErr != "") {
							t.Errorf("NotWarm of source %d: last seed error %q, message %q", nw.Source, nw.Last.SeedErr, nw.Error())
						}
					}
				}
				_, pulls := c.recorded()
				n0 := 0
				for _, pl := range pulls {
					if pl.port == basePort {
						n0++
					}
				}
				if n0 < tt.minPulls0 {
					t.Errorf("decoder saw %d pulls naming source 0, want at least %d", n0, tt.minPulls0)
				}
			})
		})
	}

	t.Run("cancelled context stops it with the context's error", func(t *testing.T) {
		c := newFakeCluster(t, 1)
		c.setPullMode(0, modeHang)
		p, err := probe.New(c.config())
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(p.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err = p.Warmup(ctx, time.Minute)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "source 0 (P2P 127.0.0.1:7777) not handshaken: stopped") {
			t.Errorf("Warmup = %v, want the context's error naming source 0", err)
		}
	})

	t.Run("non-positive timeout is refused", func(t *testing.T) {
		c := newFakeCluster(t, 1)
		p, err := probe.New(c.config())
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(p.Close)
		if err := p.Warmup(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "warm-up timeout 0s") {
			t.Errorf("Warmup(0) = %v, want an error naming the timeout", err)
		}
	})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTrialsSpreadOverRanksAndNameEachRanksPort: a source of three
// data-parallel ranks gets its trials on ranks 0, 1, 2, 0, ... in turn;
// each seed carries X-data-parallel-rank: r, each pull names remote_port
// base+r (and carries no rank header), the sample records r, and every
// pull hits because it named the rank its seed landed on. Warm-up
// handshakes each rank.
func TestTrialsSpreadOverRanksAndNameEachRanksPort(t *testing.T) {
	c := newFakeCluster(t, 1)
	cfg := c.config()
	cfg.Sources[0].Ranks = 3
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Warmup(context.Background(), 10*time.Second); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	_, warm := c.recorded()
	warmed := map[int]bool{}
	for _, w := range warm {
		warmed[w.port] = true
	}
	if len(warmed) != 3 {
		t.Errorf("warm-up pulls named ports %v, want all 3 ranks'", warmed)
	}
	r := startRun(t, p)
	r.waitSamples("9 samples", atLeast(9))
	got := r.stop(10 * time.Second)
	counts := map[int]int{}
	for _, s := range got {
		k := s.Trial // one source: trial k is its k-th
		if want := int(k % 3); s.Rank != want {
			t.Errorf("trial %d on rank %d, want %d", k, s.Rank, want)
		}
		if want := fmt.Sprintf("127.0.0.1:%d", basePort+s.Rank); s.Peer != want {
			t.Errorf("trial %d (rank %d) named %s, want %s", k, s.Rank, s.Peer, want)
		}
		if !s.Hit() {
			t.Errorf("trial %d (rank %d) missed: %+v", k, s.Rank, s.Sample)
		}
		counts[s.Rank]++
	}
	if counts[0] == 0 || counts[1] == 0 || counts[2] == 0 || counts[0]-counts[2] > 1 {
		t.Errorf("trials per rank %v: want an even spread", counts)
	}
	seeds, pulls := c.recorded()
	for _, s := range seeds {
		if s.header.Get(probe.RankHeader) == "" {
			t.Errorf("seed without %s", probe.RankHeader)
		}
	}
	for _, pl := range pulls {
		if h := pl.header.Get(probe.RankHeader); h != "" {
			t.Errorf("pull to the decoder carries %s: %s", probe.RankHeader, h)
		}
	}
}

func TestRankOfSpreadsEvenly(t *testing.T) {
	for k, want := range []int{0, 1, 0, 1} {
		if got := probe.RankOf(int64(k), 2); got != want {
			t.Errorf("RankOf(%d, 2) = %d, want %d", k, got, want)
		}
	}
	if got := probe.RankOf(7, 1); got != 0 {
		t.Errorf("RankOf(7, 1) = %d, want 0", got)
	}
}

// TestViaNamesTheLinkInEachPull: with Config.Via a pull names the address
// it returns for its source, rank and decoder (a link p2pfault relays
// through), and its sample records that address; Via returning the
// source's own address changes nothing.
func TestViaNamesTheLinkInEachPull(t *testing.T) {
	c := newFakeCluster(t, 1)
	cfg := c.config()
	cfg.Sources[0].Ranks = 2
	cfg.Via = func(source, rank, decoder int, peer string) string {
		if rank == 1 {
			return peer
		}
		return fmt.Sprintf("127.0.0.1:%d", 41000+source*10+decoder)
	}
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// No warm-up: the fake decoder hits only for the sources' own ports.
	r := startRun(t, p)
	r.waitSamples("4 samples", atLeast(4))
	for _, s := range r.stop(10 * time.Second) {
		want := "127.0.0.1:41000"
		if s.Rank == 1 {
			want = fmt.Sprintf("127.0.0.1:%d", basePort+1)
		}
		if s.Peer != want {
			t.Errorf("trial %d (rank %d) recorded %s, want %s", s.Trial, s.Rank, s.Peer, want)
		}
	}
	_, pulls := c.recorded()
	ports := map[int]bool{}
	for _, pl := range pulls {
		ports[pl.port] = true
	}
	if !ports[41000] || !ports[basePort+1] || len(ports) != 2 {
		t.Errorf("pulls named ports %v, want 41000 (rank 0's link) and %d (rank 1's own)", ports, basePort+1)
	}
}
