package probe_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/probe"
)

// benchTarget is a decoder and its sources for the benchmarks.
type benchTarget struct {
	kind    string // what answers, for the log
	decoder string
	sources []probe.Source
}

// inProcessTarget is the fake cluster of the tests, in this process: it sets
// X-Sim-Service-Time like the sim.
func inProcessTarget(b *testing.B) benchTarget {
	c := newFakeCluster(b, 1)
	return benchTarget{kind: "in-process httptest decoder", decoder: c.decoder.URL, sources: c.probeSources()}
}

// lightTarget answers every request with a canned completion, reading but
// not parsing the body: the probe's side of the work is what gets measured,
// not a JSON decoder in the server.
func lightTarget(b *testing.B) benchTarget {
	serve := func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cached := 0
		if bytes.Contains(body, []byte("remote_kv_source")) {
			cached = 384
		}
		writeCompletion(w, 400, cached, at)
	}
	decoder := httptest.NewServer(http.HandlerFunc(serve))
	b.Cleanup(decoder.Close)
	source := httptest.NewServer(http.HandlerFunc(serve))
	b.Cleanup(source.Close)
	return benchTarget{
		kind:    "in-process httptest servers that read the body but do not parse it",
		decoder: decoder.URL,
		sources: []probe.Source{{Index: 0, URL: source.URL, P2PHost: "127.0.0.1", P2PPort: basePort}},
	}
}

// simTarget is a sim decoder and one sim source, as processes (the
// P2PFAULT_TEST_MAIN re-exec), their P2P session handshaken.
func simTarget(b *testing.B) benchTarget {
	decoder, sources := simCluster(b, 1)
	p, err := probe.New(probe.Config{DecoderURL: decoder.url, Sources: sources, Model: "m", Interval: 50 * time.Millisecond})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	defer p.Close()
	if err := p.Warmup(context.Background(), 20*time.Second); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	return benchTarget{kind: "sim engines (decoder + 1 source, separate processes)", decoder: decoder.url, sources: sources}
}

// BenchmarkProbeOverhead measures what the probe adds to a pull: client-side
// latency minus the service time the engine reports in X-Sim-Service-Time,
// at a rate far below saturation so that no queueing is counted. One op is
// one trial.
// The -content-8 targets compare the texts as p2pfault does by default
// (--content-tokens 8: both legs decode 8 tokens, the seed's answer is
// read too); the others send max_tokens 1 as the seed's slice.
func BenchmarkProbeOverhead(b *testing.B) {
	targets := []struct {
		name     string
		new      func(*testing.B) benchTarget
		interval time.Duration
		tokens   int
	}{
		{"sim", simTarget, 40 * time.Millisecond, 0}, {"in-process", inProcessTarget, 5 * time.Millisecond, 0},
		{"sim-content-8", simTarget, 60 * time.Millisecond, probe.DefaultContentTokens},
		{"in-process-content-8", inProcessTarget, 5 * time.Millisecond, probe.DefaultContentTokens},
	}
	for _, tt := range targets {
		b.Run(tt.name, func(b *testing.B) {
			tg := tt.new(b)
			b.Logf("target: %s", tg.kind)
			overhead(b, tg, tt.interval, tt.tokens)
		})
	}
}

// overhead runs trials every interval: slow enough that the engines never
// queue (a sim seed of 400 tokens costs about 10 ms of simulated prefill,
// and 2 ms a decoded token).
func overhead(b *testing.B, tg benchTarget, interval time.Duration, tokens int) {
	p, err := probe.New(probe.Config{
		DecoderURL: tg.decoder, Sources: tg.sources, Model: "m", ContentTokens: tokens,
		Interval: interval, SeedTimeout: 5 * time.Second, PullTimeout: 5 * time.Second,
	})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	b.Cleanup(p.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan event.Sample)
	done := make(chan struct{})
	b.ResetTimer()
	go func() { defer close(done); p.Run(ctx, time.Now(), out) }()
	var over, latency []time.Duration
	var errs, misses, compared int
	var firstErr string
	for len(over)+errs < b.N {
		s := <-out
		if s.Status != 200 || s.Err != "" || s.ServiceTime == 0 {
			if errs == 0 {
				firstErr = fmt.Sprintf("status %d, error %q, seed error %q", s.Status, s.Err, s.SeedErr)
			}
			errs++
			continue
		}
		if !s.Hit() {
			misses++
		}
		if s.Content == event.ContentSame {
			compared++
		}
		over = append(over, s.Latency-s.ServiceTime)
		latency = append(latency, s.Latency)
	}
	b.StopTimer()
	cancel()
	for drained := false; !drained; {
		select {
		case <-out:
		case <-done:
			drained = true
		}
	}
	if errs > 0 {
		b.Errorf("%d of %d pulls failed or carried no service time; first: %s", errs, b.N, firstErr)
	}
	if misses > 0 {
		b.Logf("%d of %d pulls missed", misses, len(over))
	}
	if tokens > 0 && compared != len(over) {
		b.Errorf("%d of %d pulls gave their seed's text, want all", compared, len(over))
	}
	if len(over) == 0 {
		return
	}
	b.ReportMetric(float64(percentile(over, 0.50).Microseconds()), "overhead-p50-µs")
	b.ReportMetric(float64(percentile(over, 0.99).Microseconds()), "overhead-p99-µs")
	b.ReportMetric(float64(percentile(latency, 0.50).Microseconds()), "latency-p50-µs")
	b.ReportMetric(0, "ns/op") // time per op is the schedule's interval, not a cost
}

// BenchmarkMaxTrialRate finds the most trials per second the probe sustains
// against one decoder (every trial done without error, pulls leaving on
// schedule), then runs hey against the same endpoint with the same pull
// body, so the two can be compared in one run. One search per benchmark run:
// each step is a second of traffic, so b.N is not used. Against the sim the
// figure is the engines' capacity as much as the probe's: the in-process
// target, which does no work, shows the probe's own ceiling.
func BenchmarkMaxTrialRate(b *testing.B) {
	targets := []struct {
		name  string
		new   func(*testing.B) benchTarget
		first float64 // trials/s of the search's first step
	}{{"sim", simTarget, 10}, {"in-process-light", lightTarget, 100}}
	for _, tt := range targets {
		b.Run(tt.name, func(b *testing.B) {
			tg := tt.new(b)
			b.Logf("target: %s", tg.kind)
			maxRate(b, tg, tt.first)
		})
	}
}

func maxRate(b *testing.B, tg benchTarget, first float64) {
	const step = time.Second
	sustained := 0.0
	tryRate := func(rate float64) bool {
		ok, why := sustains(b, tg, rate, step)
		b.Logf("%8.0f trials/s: sustained=%v %s", rate, ok, why)
		if ok {
			sustained = max(sustained, rate)
		}
		return ok
	}
	lo, hi := 0.0, 0.0
	for rate := first; rate <= 51200; rate *= 2 {
		if !tryRate(rate) {
			hi = rate
			break
		}
		lo = rate
	}
	for range 3 {
		if hi == 0 || lo == 0 {
			break
		}
		mid := (lo + hi) / 2
		if tryRate(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	b.ReportMetric(sustained, "probe-trials/s")
	b.ReportMetric(2*sustained, "probe-req/s") // a trial is a seed and a pull
	if rps, err := runHey(b, tg); err != nil {
		b.Logf("hey: %v", err)
	} else {
		b.ReportMetric(rps, "hey-req/s")
	}
	b.ReportMetric(0, "ns/op")
}

// sustains runs the probe at rate trials/s for d and says whether it kept
// up: every trial answered 200 without error, 95 % of trials sent within
// 20 ms of their slot, and no backlog: the trials in flight when the
// schedule stopped were done within 500 ms (an engine that queues shows
// here, since the probe does not wait for it).
func sustains(b *testing.B, tg benchTarget, rate float64, d time.Duration) (bool, string) {
	interval := time.Duration(float64(time.Second) / rate * float64(len(tg.sources)))
	p, err := probe.New(probe.Config{
		DecoderURL: tg.decoder, Sources: tg.sources, Model: "m", PromptTokens: 400,
		Interval: interval, SeedTimeout: 5 * time.Second, PullTimeout: 5 * time.Second,
	})
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := make(chan event.Sample, 1024)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, time.Now(), out) }()
	var late, took []time.Duration
	failed := 0
	var firstErr string
	collect := func(s event.Sample) {
		if s.Status != 200 || s.Err != "" || s.SeedErr != "" {
			failed++
			if firstErr == "" {
				firstErr = s.Err
				if s.SeedErr != "" && s.SeedErr != s.Err {
					firstErr = "seed: " + s.SeedErr + "; pull: " + s.Err
				}
			}
			return
		}
		slot := time.Duration(s.Trial) * interval / time.Duration(len(tg.sources))
		late = append(late, s.Start-s.SeedLatency-slot) // when the seed left
		took = append(took, s.SeedLatency+s.Latency)
	}
	var drain time.Duration
loop:
	for {
		select {
		case s := <-out:
			collect(s)
		case <-done:
			break loop
		case <-ctx.Done():
			stopped := time.Now()
			for drained := false; !drained; {
				select {
				case s := <-out:
					collect(s)
				case <-done:
					drained = true
				}
			}
			drain = time.Since(stopped)
			break loop
		}
	}
	for len(out) > 0 {
		collect(<-out)
	}
	want := int(rate * d.Seconds())
	if failed > 0 {
		return false, fmt.Sprintf("%d failed (%s)", failed, firstErr)
	}
	if len(late) < want*95/100 {
		return false, fmt.Sprintf("%d trials of %d scheduled", len(late), want)
	}
	lateP95 := percentile(late, 0.95)
	why := fmt.Sprintf("%d trials, sent p95 %s behind slot, trial p50 %s, backlog drained in %s",
		len(late), lateP95.Round(time.Microsecond), percentile(took, 0.5).Round(time.Microsecond), drain.Round(time.Millisecond))
	return lateP95 <= 20*time.Millisecond && drain <= 500*time.Millisecond, why
}

// runHey sends the probe's pull body to the decoder with hey, the load
// generator, for the same kind of figure from a tool built only for load.
func runHey(b *testing.B, tg benchTarget) (float64, error) {
	bin, err := exec.LookPath("hey")
	if err != nil {
		return 0, fmt.Errorf("not on PATH, skipped (apt-get install -y hey): %w", err)
	}
	body := pullBody(tg.sources[0], 400)
	file := filepath.Join(b.TempDir(), "pull.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		return 0, fmt.Errorf("write body: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-z", "3s", "-c", "32", "-m", "POST", "-T", "application/json",
		"-D", file, tg.decoder+"/v1/completions")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", bin, err)
	}
	pid := cmd.Process.Pid
	b.Cleanup(func() {
		// Ends hey by its pid if the benchmark stops before it does.
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("hey (pid %d): %w: %s", pid, err, stderr.String())
	}
	m := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`).FindSubmatch(stdout.Bytes())
	if m == nil {
		return 0, fmt.Errorf("no Requests/sec in hey's output: %q", stdout.String())
	}
	if !strings.Contains(stdout.String(), "[200]") {
		return 0, fmt.Errorf("hey got no 200 answers: %s", stdout.String())
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// pullBody is a pull like the probe's, with a fixed prompt: hey repeats one
// body.
func pullBody(src probe.Source, tokens int) []byte {
	var ids []string
	for range tokens {
		ids = append(ids, strconv.Itoa(probe.MinTokenID+rand.IntN(probe.MaxTokenID-probe.MinTokenID)))
	}
	return fmt.Appendf(nil, `{"model":"m","prompt":[%s],"max_tokens":1,"temperature":0,`+
		`"kv_transfer_params":{"remote_kv_source":{"kv_request_id":"00000000-0000-4000-8000-000000000000","remote_host":%q,"remote_port":%d}}}`,
		strings.Join(ids, ","), src.P2PHost, src.P2PPort)
}

func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
