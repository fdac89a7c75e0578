package sim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// load is clients looping on one engine, each sending its own prompts of
// tokens words (one token each) until stop: a busy source.
type load struct {
	stop atomic.Bool
	wg   sync.WaitGroup
	sent atomic.Int64
}

func startLoad(c *http.Client, e *engineProc, clients, tokens int, tag string) *load {
	l := &load{}
	for i := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; !l.stop.Load(); n++ {
				l.sent.Add(1)
				postCompletion(c, e.url, map[string]any{"model": "m", "prompt": words(fmt.Sprintf("%s-%d-%d", tag, i, n), tokens), "max_tokens": 1, "temperature": 0})
			}
		}()
	}
	return l
}

// end stops the clients and waits for their last requests.
func (l *load) end() {
	l.stop.Store(true)
	l.wg.Wait()
}

// asyncDelay reads the decoder's vllm:kv_offload_lookup_async_delay_seconds
// sum and count.
func asyncDelay(t *testing.T, c *http.Client, e *engineProc) (sum float64, count int) {
	t.Helper()
	for _, line := range strings.Split(get(t, c, e.url+"/metrics"), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "vllm:kv_offload_lookup_async_delay_seconds_sum{"):
			sum, _ = strconv.ParseFloat(v, 64)
		case strings.HasPrefix(name, "vllm:kv_offload_lookup_async_delay_seconds_count{"):
			count, _ = strconv.Atoi(v)
		}
	}
	return sum, count
}

// busyPulls seeds and pulls n prompts from a source that clients×tokens
// keep busy, one after the other, and returns the decoder's mean lookup delay over
// those pulls, from its histogram. The engines take 7000-token prompts
// (--max-model-len 8192), the source with srcArgs as well.
func busyPulls(t *testing.T, clients, tokens, n int, srcArgs ...string) time.Duration {
	vc := newVCluster(t)
	src := vc.start("source-0", engineOpts{args: append([]string{"--max-model-len", "8192"}, srcArgs...)})
	dec := vc.start("decoder", engineOpts{args: []string{"--max-model-len", "8192"}})
	warm(t, vc.c, dec.engineProc, src.engineProc)
	l := startLoad(vc.c, src.engineProc, clients, tokens, "busy-load")
	defer l.end()
	time.Sleep(time.Second) // the load's queue fills
	sum0, count0 := asyncDelay(t, vc.c, dec.engineProc)
	for i := range n {
		// Seeded just before its pull: the load's own prompts evict older
		// blocks from the source's CPU tier (LRU) within seconds.
		p := words(fmt.Sprint("busy-pull-", i), 400)
		seed(t, vc.c, src.engineProc, p)
		if r := pull(vc.c, dec.engineProc, src.engineProc, p); r.status != http.StatusOK || r.cached == 0 {
			t.Fatalf("pull %d from the busy source: status %d cached %d err %v, want a hit", i, r.status, r.cached, r.err)
		}
	}
	sum, count := asyncDelay(t, vc.c, dec.engineProc)
	if count-count0 != n {
		t.Fatalf("the decoder observed %d lookup delays for %d pulls", count-count0, n)
	}
	return time.Duration((sum - sum0) / float64(n) * float64(time.Second)).Round(time.Microsecond)
}

// TestVirtualLookupDelayGrowsWithTheSourcesStepLength: the P2P tier is
// served once per step, so a lookup that reaches a source mid-step waits
// for its end (MODEL.md, the scheduler): the decoder's lookup delay grows
// with the source's step. Two 1000-token clients keep the source's steps
// at 2000 tokens (52 ms at 26 µs a token); sixteen 7000-token clients fill
// the 2048-token budget every step (53.2 ms) and, with
// --max-num-batched-tokens 8192, steps of 213 ms.
func TestVirtualLookupDelayGrowsWithTheSourcesStepLength(t *testing.T) {
	const pulls = 6
	loads := []struct {
		name            string
		clients, tokens int
		srcArgs         []string
	}{
		{"idle", 0, 0, nil},
		{"2 clients x 1000 tokens", 2, 1000, nil},
		{"16 clients x 7000 tokens, 8192-token steps", 16, 7000, []string{"--max-num-batched-tokens", "8192"}},
	}
	var got []time.Duration
	for _, l := range loads {
		synctest.Test(t, func(t *testing.T) {
			got = append(got, busyPulls(t, l.clients, l.tokens, pulls, l.srcArgs...))
		})
		t.Logf("%s: mean lookup delay of %d pulls %v", l.name, pulls, got[len(got)-1])
	}
	if t.Failed() {
		return
	}
	// Idle: the source answers at its next tick. Busy: each pull follows
	// its seed, which the source answers at a step's end, so its lookup
	// lands as the next step starts and waits for all of it: the delay is
	// the source's step (2000 or 8192 tokens at 26 µs, held to the 5 ms
	// tick), give or take the ticks on either side.
	if got[1] <= got[0] || got[2] <= got[1] {
		t.Errorf("lookup delays %v: want each load's longer than the one before", got)
	}
	for i, want := range []time.Duration{vTick, 52 * time.Millisecond, 213 * time.Millisecond} {
		if got[i] < want || got[i] > want+3*vTick {
			t.Errorf("%s: mean lookup delay %v, want the source's step %v (+ up to %v of ticks)", loads[i].name, got[i], want, 3*vTick)
		}
	}
}
