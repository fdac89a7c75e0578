package engine

import (
	"fmt"
	"testing"
	"time"
)

// burst submits n prompts of the given length at once to an engine
// without P2P at the sim's default costs and returns each one's latency, in
// submission order.
func burst(t *testing.T, n, promptLen, maxTokens int) []time.Duration {
	return burstAttending(t, n, promptLen, maxTokens, 0)
}

// burstAttending is burst with the attention term (Config.AttentionContext).
func burstAttending(t *testing.T, n, promptLen, maxTokens, attention int) []time.Duration {
	t.Helper()
	e := startEngine(t, func(c *Config) {
		c.P2P = false
		c.Tick = 5 * time.Millisecond
		c.PrefillPerToken = 26 * time.Microsecond
		c.DecodePerToken = 2 * time.Millisecond
		c.AttentionContext = attention
	})
	lat := make([]time.Duration, n)
	done := make(chan int, n)
	start := time.Now()
	for i := range n {
		e.Submit(uint64(i+1), Request{Tokens: prompt(fmt.Sprint("burst", i), promptLen), MaxTokens: maxTokens}, func(r Result) {
			if r.Err != nil {
				t.Errorf("request %d: %v", i, r.Err)
			}
			lat[i] = time.Since(start)
			done <- i
		})
	}
	for range n {
		<-done
	}
	return lat
}

// heldSteps is how long n prompt tokens take on the scheduler, packed
// into steps of the budget as FCFS chunked prefill packs them: each step
// costs its tokens at cost, held to the first tick after its end (the next
// step starts on a tick).
func heldSteps(n, budget int, cost, tick time.Duration) time.Duration {
	return heldAttendingSteps(n, budget, cost, tick, 0)
}

// heldAttendingSteps is heldSteps for one prompt with the attention term:
// each token at position p costs cost × p / attention more (0: none).
func heldAttendingSteps(n, budget int, cost, tick time.Duration, attention int) time.Duration {
	var d time.Duration
	for from := 0; from < n; from += budget {
		k := min(n-from, budget)
		step := time.Duration(k) * cost
		if attention > 0 {
			var pos int64 // the positions from … from+k-1
			for p := from; p < from+k; p++ {
				pos += int64(p)
			}
			step += time.Duration(pos * int64(cost) / int64(attention))
		}
		d += (step + tick - 1) / tick * tick
	}
	return d
}

// TestConcurrentPromptsShareTheSteps: sixteen 7000-token prompts sent at
// once share one engine's steps, so the last ends when all their tokens
// have been computed, about sixteen times one prompt's time (not with it,
// as when every request had a GPU of its own), and they end first come
// first served.
func TestConcurrentPromptsShareTheSteps(t *testing.T) {
	virtual(t, func(t *testing.T) {
		const tick, cost, budget = 5 * time.Millisecond, 26 * time.Microsecond, DefaultMaxNumBatchedTokens
		one := burst(t, 1, 7000, 1)[0]
		many := burst(t, 16, 7000, 1)
		// The first tick takes the requests up; one token each, sampled
		// by the step that computes the last chunk.
		if want := tick + heldSteps(7000, budget, cost, tick); one != want {
			t.Errorf("one 7000-token prompt took %v, want %v (4 steps)", one, want)
		}
		last := many[len(many)-1]
		if want := tick + heldSteps(16*7000, budget, cost, tick); last != want {
			t.Errorf("the last of 16 took %v, want %v (%d steps)", last, want, (16*7000+budget-1)/budget)
		}
		if r := float64(last) / float64(one); r < 15 || r > 16.5 {
			t.Errorf("16 prompts at once took %.1f times one, want about 16", r)
		}
		for i := 1; i < len(many); i++ {
			if many[i] < many[i-1] {
				t.Errorf("prompt %d ended at %v, before prompt %d at %v: want first come first served", i, many[i], i-1, many[i-1])
			}
		}
		t.Logf("one 7000-token prompt %v; 16 at once: first %v, last %v (%.1f times one)", one, many[0], last, float64(last)/float64(one))
	})
}

// TestQueuesCountWhatTheBudgetReaches: of sixteen 7000-token prompts, the
// first step's 2048 tokens all go to the first, so one request runs and
// fifteen wait (vllm:num_requests_running / _waiting), until the first's
// last chunk leaves room for the second.
func TestQueuesCountWhatTheBudgetReaches(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := startEngine(t, func(c *Config) {
			c.P2P = false
			c.Tick = 5 * time.Millisecond
			c.PrefillPerToken = 26 * time.Microsecond
		})
		for i := range 16 {
			e.Submit(uint64(i+1), Request{Tokens: prompt(fmt.Sprint("queue", i), 7000), MaxTokens: 1}, func(Result) {})
		}
		read := func() (q Queues) {
			e.inLoop(func(e *Engine) { q, _ = e.queues() })
			return q
		}
		time.Sleep(20 * time.Millisecond) // inside the first step
		if q := read(); q != (Queues{Running: 1, Waiting: 15}) {
			t.Errorf("in the first step: %+v, want 1 running, 15 waiting", q)
		}
		// The fourth step (from 165 ms) holds the first's last 856 tokens
		// and the second's first 1192.
		time.Sleep(160 * time.Millisecond)
		if q := read(); q != (Queues{Running: 2, Waiting: 14}) {
			t.Errorf("in the fourth step: %+v, want 2 running, 14 waiting", q)
		}
	})
}

// TestAttentionGrowsAStepWithItsContext: with the attention term a token
// costs more the further into its prompt it is (MODEL.md, mechanism 20),
// so a 60,000-token prompt's late chunks cost about three times its first
// and the whole prompt about twice, while a 400-token prompt (the seed's
// trials) costs the ticks it did: 10.4 ms of compute plus 0.07 ms of
// attention, both held to 15 ms. (The term is not nothing at 512 tokens:
// a 384-token prompt's 9.98 ms becomes 10.05 ms and crosses a tick.)
func TestAttentionGrowsAStepWithItsContext(t *testing.T) {
	virtual(t, func(t *testing.T) {
		const tick, cost, budget, attention = 5 * time.Millisecond, 26 * time.Microsecond, DefaultMaxNumBatchedTokens, 29700
		long := burstAttending(t, 1, 60000, 1, attention)[0]
		if want := tick + heldAttendingSteps(60000, budget, cost, tick, attention); long != want {
			t.Errorf("a 60000-token prompt took %v, want %v", long, want)
		}
		if flat := tick + heldSteps(60000, budget, cost, tick); float64(long) < 1.9*float64(flat) {
			t.Errorf("a 60000-token prompt took %v with attention, want about twice its %v without", long, flat)
		}
		seedLike := burstAttending(t, 1, 400, 1, attention)[0]
		if flat := burst(t, 1, 400, 1)[0]; seedLike != flat {
			t.Errorf("a 400-token prompt took %v with attention, %v without: want the same ticks", seedLike, flat)
		}
		t.Logf("60000-token prompt %v; 400-token prompt %v", long, seedLike)
	})
}
