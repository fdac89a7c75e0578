package engine

import (
	"fmt"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/sim/simlog"
)

// clockedEngine is an engine without P2P whose clock the test drives.
func clockedEngine(t *testing.T) *Engine {
	t.Helper()
	cfg := testConfig()
	cfg.P2P = false
	cfg.PrefillPerToken = 0
	cfg.DecodePerToken = 10 * time.Millisecond
	e, err := New(cfg, simlog.New(&syncbuf.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTokenHookFollowsTheDecodeCost(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := clockedEngine(t)
		var got []string
		hooks := &Hooks{
			Token:   func(n int) { got = append(got, fmt.Sprint("token ", n)) },
			Aborted: func(Stats, int) { got = append(got, "aborted") },
		}
		e.Submit(1, Request{Tokens: prompt("stream", 40), MaxTokens: 5, Hooks: hooks}, func(r Result) {
			got = append(got, fmt.Sprint("done err=", r.Err))
		})
		t0 := time.Unix(1000, 0)
		e.Step(t0) // admitted, prefilled (no cost): the prefill's step samples token 1
		if fmt.Sprint(got) != "[token 1]" {
			t.Fatalf("at the prefill's end: %v", got)
		}
		e.Step(t0.Add(25 * time.Millisecond))
		if fmt.Sprint(got) != "[token 1 token 2 token 3]" {
			t.Fatalf("after 25 ms of 10 ms tokens: %v", got)
		}
		e.Step(t0.Add(50 * time.Millisecond))
		if fmt.Sprint(got) != "[token 1 token 2 token 3 token 4 token 5 done err=<nil>]" {
			t.Errorf("at the decode's end: %v", got)
		}
	})
}

func TestCancelledRequestReportsAbortedNotDone(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := clockedEngine(t)
		var tokens, abortedAfter = 0, -1
		var st Stats
		done := false
		hooks := &Hooks{Token: func(n int) { tokens = n }, Aborted: func(s Stats, n int) { abortedAfter, st = n, s }}
		e.Submit(7, Request{Tokens: prompt("abort", 40), MaxTokens: 100, Hooks: hooks}, func(Result) { done = true })
		t0 := time.Unix(1000, 0)
		e.Step(t0)
		e.Step(t0.Add(35 * time.Millisecond))
		e.Cancel(7)
		e.Step(t0.Add(36 * time.Millisecond))
		// Tokens at 0, 10, 20 and 30 ms: 4 sampled when the cancel comes.
		if abortedAfter != 4 || tokens != 4 || done || st.PromptTokens != 40 {
			t.Errorf("aborted after %d tokens (sampled %d), done %v, stats %+v: want 4, 4, false, 40 prompt tokens", abortedAfter, tokens, done, st)
		}
		if len(e.active) != 0 || len(e.byID) != 0 {
			t.Errorf("the request is still held: %d active, %d by id", len(e.active), len(e.byID))
		}
		e.Step(t0.Add(2 * time.Second))
		if done || tokens != 4 {
			t.Errorf("a dropped request went on: done %v, %d tokens", done, tokens)
		}
	})
}
