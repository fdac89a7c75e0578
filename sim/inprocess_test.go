package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestInProcessPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t)
		src := vc.start("source", engineOpts{})
		dec := vc.start("decoder", engineOpts{})
		p := words("inproc", 400)
		seed(t, vc.c, src.engineProc, p)
		r := pull(vc.c, dec.engineProc, src.engineProc, p)
		if r.err != nil || r.status != http.StatusOK || r.cached == 0 {
			t.Fatalf("pull over memnet: status %d cached %d err %v body %s", r.status, r.cached, r.err, r.body)
		}
		t.Logf("pull: cached %d of %d in %s", r.cached, r.prompt, r.latency)
	})
}

// vStallRun freezes source 0 for stall while pulls naming each source start
// every interval until horizon, on the fake clock; times are since the
// freeze.
func vStallRun(t *testing.T, vc *vcluster, mode string, stall, interval, horizon time.Duration) (src0, src1, dec *vengine, samples []sample) {
	t.Helper()
	src0 = vc.start("source-0", engineOpts{})
	src1 = vc.start("source-1", engineOpts{})
	dec = vc.start("decoder", engineOpts{mode: mode})
	warm(t, vc.c, dec.engineProc, src0.engineProc)
	warm(t, vc.c, dec.engineProc, src1.engineProc)
	n := int(horizon / interval)
	prompts := make([]string, n)
	for i := range prompts {
		prompts[i] = words(fmt.Sprintf("%s-s0-%d", mode, i), 400)
		seed(t, vc.c, src0.engineProc, prompts[i])
	}
	t0 := time.Now()
	src0.p.Freeze()
	time.AfterFunc(stall, src0.p.Thaw)
	samples = vPulls(t, vc, dec, src0, src1, prompts, t0, interval, "stall")
	return src0, src1, dec, samples
}

// vPulls starts, every interval from t0, a pull naming src0 of the next of
// prompts (seeded before) and one naming src1 of a prompt seeded just
// before it, and returns them in start order; times are since t0.
func vPulls(t *testing.T, vc *vcluster, dec, src0, src1 *vengine, prompts []string, t0 time.Time, interval time.Duration, tag string) []sample {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var samples []sample
	for i := range prompts {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			r := pull(vc.c, dec.engineProc, src0.engineProc, prompts[i])
			mu.Lock()
			samples = append(samples, timed(0, t0, r))
			mu.Unlock()
		}(i)
		go func(i int) {
			defer wg.Done()
			p := words(fmt.Sprintf("%s-s1-%d", tag, i), 400)
			seed(t, vc.c, src1.engineProc, p)
			r := pull(vc.c, dec.engineProc, src1.engineProc, p)
			mu.Lock()
			samples = append(samples, timed(1, t0, r))
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	sort.Slice(samples, func(i, j int) bool {
		if samples[i].start != samples[j].start {
			return samples[i].start < samples[j].start
		}
		return samples[i].source < samples[j].source
	})
	return samples
}

// TestInProcessSignalsOnAFrozenEngine: a stopped process acts on SIGTERM
// only once continued, and SIGKILL ends it stopped or not.
func TestInProcessSignalsOnAFrozenEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t)
		e := vc.start("engine", engineOpts{})
		e.p.Freeze()
		termed := make(chan error, 1)
		go func() { termed <- e.p.Terminate(context.Background()) }()
		time.Sleep(5 * time.Second)
		select {
		case <-e.p.Done():
			t.Fatal("a frozen engine exited on SIGTERM before SIGCONT")
		default:
		}
		t0 := time.Now()
		e.p.Thaw()
		if err := <-termed; err != nil {
			t.Errorf("exit after SIGTERM: %v, want a clean exit", err)
		}
		if d := time.Since(t0); d > shutdownBound {
			t.Errorf("the thawed engine took %v to act on SIGTERM", d)
		}
		if !strings.Contains(e.log.String(), "shutting down on signal") {
			t.Errorf("log lacks the SIGTERM shutdown:\n%s", e.log)
		}

		vc.restart(e)
		e.p.Freeze()
		e.p.Kill()
		<-e.p.Done()
		if !errors.Is(e.p.Err(), ErrKilled) {
			t.Errorf("exit after SIGKILL of a frozen engine: %v, want %v", e.p.Err(), ErrKilled)
		}
		// The restart on the same ports binds them again.
		vc.restart(e)
		if r := postCompletion(vc.c, e.url, map[string]any{"model": "m", "prompt": "x", "max_tokens": 1}); r.status != http.StatusOK {
			t.Errorf("completion on the engine restarted after SIGKILL: %d %v", r.status, r.err)
		}
	})
}

// shutdownBound is how long a graceful shutdown takes on the fake clock at
// most: the steps to tell the peers and the front end, within the core's
// link flush (1 s).
const shutdownBound = time.Second
