package scrape_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/probe"
	"p2pfault/runner"
	"p2pfault/runner/session"
	"p2pfault/scrape"
	"p2pfault/sim"
)

// timeScale compresses the sim's timeouts: heartbeat 10 s -> 1 s,
// handshake 30 s -> 3 s.
const timeScale = 0.1

// startSimCluster starts two simulated sources and a decoder as processes,
// each in its own session, on free loopback ports. The cluster is stopped
// in Cleanup, which resumes a stopped engine before ending it.
func startSimCluster(t *testing.T) *runner.Cluster {
	t.Helper()
	c, err := runner.Start(context.Background(), runner.Config{
		OutDir:       t.TempDir(),
		FreePorts:    true,
		TimeScale:    timeScale,
		Env:          []string{sim.StandaloneEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		ReadyTimeout: 60 * time.Second,
		StopGrace:    5 * time.Second,
	})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	return c
}

type updates struct {
	mu  sync.Mutex
	all []scrape.Update
}

func (u *updates) add(x scrape.Update) { u.mu.Lock(); u.all = append(u.all, x); u.mu.Unlock() }

// since returns the updates of engine of kind k sent at or after from.
func (u *updates) since(engine string, k scrape.Kind, from time.Time) []scrape.Update {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []scrape.Update
	for _, x := range u.all {
		if x.Engine == engine && x.Kind == k && !x.At.Before(from) {
			out = append(out, x)
		}
	}
	return out
}

// TestSimMetricsDuringAStall scrapes real simulated engines while pulls
// naming source-0 go on and source-0 is SIGSTOPped: the decoder exports
// every series read, its waiting requests rise above 0 while the pulls are
// held on the frozen source, the frozen source's failing scrapes are told
// once, and told again once when it answers after SIGCONT.
func TestSimMetricsDuringAStall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts engines")
	}
	c := startSimCluster(t)
	var srcs []probe.Source
	for _, s := range c.Sources() {
		srcs = append(srcs, probe.Source{Index: s.Index(), URL: s.HTTPURL(), P2PHost: s.P2PHost(), P2PPort: s.P2PPort()})
	}
	p, err := probe.New(probe.Config{DecoderURL: c.Decoder().HTTPURL(), Sources: srcs, Model: runner.DefaultModel,
		Interval: 100 * time.Millisecond, PromptTokens: 130,
		// A seed on the frozen source hangs; its pull goes out once the seed gives up.
		SeedTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Warmup(context.Background(), 20*time.Second); err != nil {
		t.Fatalf("warm-up: %v", err)
	}

	var targets []scrape.Target
	for _, e := range c.Engines() {
		targets = append(targets, scrape.Target{Name: e.Name(), URL: e.HTTPURL()})
	}
	// A timeout well over a loaded machine's delays, well under the stall.
	sc, err := scrape.New(scrape.Config{Targets: targets, Interval: 100 * time.Millisecond, Timeout: time.Second, RateWindow: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got updates
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sc.Run(ctx, got.add) })
	out := make(chan event.Sample, 1024)
	wg.Go(func() { p.Run(ctx, time.Now(), out) })
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range out {
		}
	}()
	t.Cleanup(func() {
		stop()
		p.Abort() // hung pulls end now
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			close(out) // Run has returned: nothing sends on out any more
			<-drained
		case <-time.After(20 * time.Second):
			t.Error("scraper and probe did not end within 20s of the end")
		}
	})

	// Baseline: pulls hit, so every series moves on the decoder. Wait for
	// a second of scrapes (slower on a loaded machine).
	baseline := time.Now()
	var dec []scrape.Update
	for deadline := time.Now().Add(20 * time.Second); ; {
		time.Sleep(100 * time.Millisecond)
		dec = got.since("decoder", scrape.KindScraped, baseline)
		if len(dec) >= 3 && time.Since(baseline) > 1200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decoder scraped %d times in 20s; failures: %+v", len(dec), got.since("decoder", scrape.KindFailed, baseline))
		}
	}
	last := dec[len(dec)-1]
	for name, v := range map[string]event.MetricValue{
		scrape.SeriesRunning: last.Reading.Running, scrape.SeriesWaiting: last.Reading.Waiting,
		scrape.SeriesExtHits: last.Reading.ExtHits, scrape.SeriesExtQueries: last.Reading.ExtQueries,
		scrape.SeriesTierRead + `{tier="1:p2p"}`: last.Reading.P2PReadBytes,
	} {
		if !v.OK {
			t.Errorf("the sim's decoder does not export %s", name)
		}
	}
	if !last.Live.HitRate.OK || last.Live.HitRate.V < 0.5 || !last.Live.P2PReadBps.OK || last.Live.P2PReadBps.V <= 0 {
		t.Errorf("baseline: hit rate %v, P2P %v B/s; want pulls landing", last.Live.HitRate, last.Live.P2PReadBps)
	}

	// Stall source-0: its whole session (front end and core).
	src0, err := c.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	_, sid, ok := src0.Session()
	if !ok {
		t.Fatal("source-0 has no session")
	}
	t.Cleanup(func() { _, _ = session.Signal(sid, unix.SIGCONT) }) // whatever happens below
	stallAt := time.Now()
	if _, err := session.Signal(sid, unix.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP source-0: %v", err)
	}
	time.Sleep(2500 * time.Millisecond) // over the scrape timeout: source-0's scrapes fail
	if _, err := session.Signal(sid, unix.SIGCONT); err != nil {
		t.Fatalf("SIGCONT source-0: %v", err)
	}
	resumeAt := time.Now()
	// Until source-0 answers again (its hung scrape ends on SIGCONT).
	for deadline := time.Now().Add(10 * time.Second); len(got.since("source-0", scrape.KindRecovered, baseline)) == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}

	maxWaiting := 0.0
	for _, u := range got.since("decoder", scrape.KindScraped, stallAt) {
		if u.At.Before(resumeAt) && u.Reading.Waiting.OK {
			maxWaiting = max(maxWaiting, u.Reading.Waiting.V)
		}
	}
	t.Logf("decoder: up to %.0f requests waiting during the stall", maxWaiting)
	if maxWaiting <= 0 {
		t.Errorf("the decoder's waiting requests never rose above 0 while source-0 was stopped")
	}
	// The report's deltas over the decoder's scrapes: the baseline moved
	// P2P bytes, and the stall held requests.
	var points []scrape.Point
	for _, u := range got.since("decoder", scrape.KindScraped, baseline) {
		points = append(points, scrape.Point{T: u.At.Sub(baseline), Reading: u.Reading})
	}
	base := scrape.Window(points, 0, stallAt.Sub(baseline))
	fault := scrape.Window(points, stallAt.Sub(baseline), resumeAt.Sub(baseline))
	t.Logf("decoder deltas: baseline hits %v of %v tokens, P2P %v B; stall hits %v of %v tokens, P2P %v B, max waiting %v",
		base.ExtHits, base.ExtQueries, base.P2PReadBytes, fault.ExtHits, fault.ExtQueries, fault.P2PReadBytes, fault.MaxWaiting)
	if !base.P2PReadBytes.OK || base.P2PReadBytes.V <= 0 || !base.ExtHits.OK || base.ExtHits.V <= 0 {
		t.Errorf("baseline deltas %+v: want P2P bytes and external hits", base)
	}
	if fault.MaxWaiting != event.MetricOf(maxWaiting) {
		t.Errorf("stall window's max waiting %v, want %v as scraped", fault.MaxWaiting, maxWaiting)
	}
	failed := got.since("source-0", scrape.KindFailed, baseline)
	recovered := got.since("source-0", scrape.KindRecovered, baseline)
	if len(failed) != 1 || len(recovered) != 1 {
		t.Errorf("source-0: %d failure updates and %d recoveries over a 2.5s stall scraped every 100ms with a 1s timeout; want 1 and 1", len(failed), len(recovered))
	} else {
		t.Logf("source-0: %q, then %q", failed[0].Message, recovered[0].Message)
	}
	if n := len(got.since("source-1", scrape.KindFailed, baseline)); n != 0 {
		t.Errorf("healthy source-1 failed %d scrapes", n)
	}
}
