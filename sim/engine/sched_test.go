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
	t.Helper()
	e := startEngine(t, func(c *Config) {
		c.P2P = false
		c.Tick = 5 * time.Millisecond
		c.PrefillPerToken = 26 * time.Microsecond
		c.DecodePerToken = 2 * time.Millisecond
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

func TestDebugBurst(t *testing.T) {
	virtual(t, func(t *testing.T) {
		t.Log(burst(t, 1, 7000, 1))
		t.Log(burst(t, 16, 7000, 1))
		t.Log(burst(t, 30, 400, 1))
	})
}
