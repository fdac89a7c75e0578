package sim

import (
	"fmt"
	"net/http"
	"sort"
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
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	src0.p.Freeze()
	time.AfterFunc(stall, src0.p.Thaw)
	for i := 0; i < n; i++ {
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
			p := words(fmt.Sprintf("%s-s1-%d", mode, i), 400)
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
	return src0, src1, dec, samples
}
