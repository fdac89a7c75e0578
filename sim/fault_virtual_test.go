package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The fault tests of fault_test.go on in-process engines (StartInProcess
// on memnet) inside synctest bubbles: real time (no --sim-time-scale), and
// every figure exact, since the fake clock moves only when every goroutine
// waits and a loaded machine cannot delay a deadline.
const (
	vLookupTO     = 8 * time.Second  // --sim-lookup-timeout
	vHeartbeatIvl = 2 * time.Second  // --sim-heartbeat-interval
	vHandshakeTO  = 30 * time.Second // VLLM_P2P_HANDSHAKE_TIMEOUT_S
	vStall        = 30 * time.Second // the seed's stall
	vEvery        = 500 * time.Millisecond
	vTick         = 5 * time.Millisecond // --sim-tick
	// vMissCost is a pull's time in the decoder when it misses and
	// prefills locally: the step that takes it up, the prefill of its 400
	// tokens (26 µs each: 10.4 ms; the step after its end lands it and
	// samples its one token), plus the link's steps: 15-30 ms by the order
	// the bubble runs the engine's and the link's goroutines in.
	vMissCost = 30 * time.Millisecond
	// vBurstStep is one full step of the scheduler: the 2048-token budget
	// at 26 µs a token (53.2 ms), held to the next 5 ms tick.
	vBurstStep = 55 * time.Millisecond
	// vHitCost bounds a pull that hits: lookup, fetch and transfer of 3
	// blocks over P2P, a few steps on each side (35-40 ms by the step a
	// pull starts at), and a step either way on each hop (atStep).
	vHitCost = 50 * time.Millisecond
	// vHandshakeCost bounds a new session's handshake that is answered:
	// dial, connect and connect_ack, a step or two on each side.
	vHandshakeCost = 20 * time.Millisecond
)

// atStep: got is want, exact to the scheduler steps. A message that
// arrives at the very instant of its receiver's step is taken by that step
// or by the next, as the bubble runs the two goroutines in either order, a
// pull may start between two steps, and a prefill lands at the first step
// after its end; so a figure can be up to three ticks shorter than the sum
// of its costs (the step that takes it up, the one that lands its
// prefill, the link's), never longer.
func atStep(got, want time.Duration) bool { return got >= want-3*vTick && got <= want }

// vBurst bounds how long n local prefills of 400 tokens released at one
// step take to end after the first of them: they share the steps' token
// budget first come first served (MODEL.md, "the scheduler pays for
// load"), so the last ends within the steps their tokens fill.
func vBurst(n int) time.Duration { return time.Duration((n*400+2047)/2048) * vBurstStep }

// inBurst: end is that of one of n local prefills released at release:
// no earlier than a lone miss's cost, no later than the burst's steps after.
func inBurst(end, release time.Duration, n int) bool {
	return end >= release+vMissCost-vTick && end <= release+vMissCost+vBurst(n)
}

func TestVirtualStallOfASource(t *testing.T) {
	for _, mode := range []string{"wait", "prefill"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { virtualStall(t, mode) })
		})
	}
}

func virtualStall(t *testing.T, mode string) {
	const L, H = vLookupTO, vHandshakeTO
	vc := newVCluster(t)
	src0, src1, dec, samples := vStallRun(t, vc, mode, vStall, vEvery, L+H+7*time.Second)
	var s0, healthy []sample
	for _, s := range samples {
		if s.r.err != nil || s.r.status != http.StatusOK {
			t.Fatalf("%v: want 200 (body %s)", s, s.r.body)
		}
		if s.source == 1 {
			healthy = append(healthy, s)
			continue
		}
		s0 = append(s0, s)
	}
	// The pull in flight at the freeze ends when the lookup deadline reaps
	// the session: L after the source's last frame, which came at most one
	// heartbeat interval (and the steps of a ping's round trip) before, or
	// just after: libzmq's I/O thread answers a PING at once, so a PONG
	// written as the process stops is read on the decoder's side after.
	reap := s0[0].end - vMissCost
	if reap < L-vHeartbeatIvl-2*vTick || reap > L+5*vTick {
		t.Fatalf("the session was reaped %v after the freeze, want within [%v, %v]", reap, L-vHeartbeatIvl, L+5*vTick)
	}
	// Every pull sent before the reap misses, answered at the reap, first
	// come first served as their prefills share the steps.
	var open time.Duration = -1 // the first pull after the reap: it opens the next session
	atReap := 0
	for _, s := range s0 {
		if s.start < reap {
			atReap++
		}
	}
	for i, s := range s0 {
		switch {
		case s.start < reap:
			if s.r.cached != 0 || !inBurst(s.end, reap, atReap) || (i > 0 && s.end < s0[i-1].end) {
				t.Errorf("%v: a pull in flight at the reap must miss at it, in order (%v + %v for %d prefills)", s, s0[0].end, vBurst(atReap), atReap)
			}
		case open < 0:
			open = s.start
		}
	}
	if open < 0 {
		t.Fatal("no pull after the reap")
	}
	// The next session's connect lands in the frozen source's backlog and
	// is routed to the stale connection at the thaw: its handshake runs to
	// the deadline, H after it opened.
	deadline := open + H
	atDeadline := 0 // main: the pulls waiting on the handshake, all released at its deadline
	for _, s := range s0 {
		if s.start >= reap && s.start < deadline {
			atDeadline++
		}
	}
	// The healthy source keeps hitting at its own pace, but a hit that
	// meets the decoder's prefills of a burst waits its turn for a step.
	for _, s := range healthy {
		bound := vHitCost
		for _, b := range []struct {
			at time.Duration
			n  int
		}{{reap, atReap}, {deadline, atDeadline}} {
			if s.start < b.at+vMissCost+vBurst(b.n) && s.end > b.at {
				bound = vHitCost + vBurst(b.n)
			}
		}
		if s.r.cached == 0 || s.end-s.start > bound {
			t.Errorf("%v: want a hit within %v", s, bound)
		}
	}
	var slowest time.Duration
	hits := 0
	for _, s := range s0 {
		if s.start < vStall {
			slowest = max(slowest, s.end-s.start)
		}
		switch {
		case s.start >= reap && s.start < deadline:
			if s.r.cached != 0 {
				t.Errorf("%v: a hit before the reconnect's handshake deadline %v", s, deadline)
			}
			switch mode {
			case "wait": // vLLM main: it waits for the handshake, then prefills
				if !inBurst(s.end, deadline, atDeadline) {
					t.Errorf("%v: want it to wait for the handshake deadline and end in [%v, %v] (%d prefills)", s, deadline+vMissCost, deadline+vMissCost+vBurst(atDeadline), atDeadline)
				}
			case "prefill": // the fix: it misses at once
				if !atStep(s.end-s.start, vMissCost) {
					t.Errorf("%v: want a local prefill at once (%v, to the step)", s, vMissCost)
				}
			}
		case s.start > deadline+vMissCost:
			// The next handshake is answered: pulls hit again, the first
			// of them after that handshake.
			// (one that meets the waiters' burst waits its turn)
			bound := vHitCost + vHandshakeCost
			if s.start < deadline+vMissCost+vBurst(atDeadline) {
				bound += vBurst(atDeadline)
			}
			if s.r.cached == 0 || s.end-s.start > bound {
				t.Errorf("%v: after the handshake deadline, want a hit within %v", s, bound)
			}
			hits++
		}
	}
	if hits < 10 {
		t.Errorf("%d pulls hit after the handshake deadline, want ≥ 10", hits)
	}
	// The seed's faulted max: main waits out the handshake, the fix only
	// the lookup timeout.
	// The slowest is the first of main's waiters: the first served of its
	// burst, in one full step.
	want := map[string]time.Duration{"wait": H + vMissCost, "prefill": s0[0].end}[mode]
	if slowest < want-vTick || slowest > want+vBurstStep {
		t.Errorf("slowest pull naming the stopped source took %v, want %v (to the step, + one step of a burst)", slowest, want)
	}
	for _, l := range []struct {
		e    *vengine
		line string
	}{
		{dec, "lookup on " + src0.p2pID() + " timed out after 8.0s"},
		{dec, "peer " + src0.p2pID() + " down: lookup timed out"},
		{dec, "P2PSession " + src0.p2pID() + ": handshake timed out after 30.0s"},
		{src0, "connect from " + dec.p2pID() + " routed to a stale connection and dropped"},
		{src0, "engine resumed after 30.0s frozen"},
	} {
		if !strings.Contains(l.e.log.String(), l.line) {
			t.Errorf("%s log lacks %q", l.e.name, l.line)
		}
	}
	if strings.Contains(dec.log.String(), src1.p2pID()+" down") {
		t.Errorf("the session with the healthy source went down")
	}
	if t.Failed() {
		for _, s := range s0 {
			t.Log(s)
		}
	}
}

func TestVirtualKillOrRemoveASource(t *testing.T) {
	tests := []struct {
		mode    string
		kill    bool   // SIGKILL, else SIGTERM
		wantLog string // on the decoder: how it learnt
	}{
		{"wait", true, "down: connection"},
		{"prefill", true, "down: connection"},
		{"wait", false, "down: connection closed by peer"}, // its ROUTER closes: EVENT_DISCONNECTED
		{"prefill", false, "down: connection closed by peer"},
	}
	for _, tt := range tests {
		sig := map[bool]string{true: "SIGKILL", false: "SIGTERM"}[tt.kill]
		t.Run(fmt.Sprintf("%s %s: pulls return at once, a restart on the same ports serves again", tt.mode, sig), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				vc := newVCluster(t)
				src := vc.start("source-0", engineOpts{})
				dec := vc.start("decoder", engineOpts{mode: tt.mode})
				warm(t, vc.c, dec.engineProc, src.engineProc)
				prompts := make([]string, 5)
				for i := range prompts {
					prompts[i] = words(fmt.Sprintf("%s-%s-%d", tt.mode, sig, i), 400)
					seed(t, vc.c, src.engineProc, prompts[i])
				}
				t0 := time.Now()
				if tt.kill {
					logged := len(src.log.String())
					src.p.Kill()
					<-src.p.Done()
					// SIGKILL: the log ends where it was, mid-run.
					if rest := src.log.String()[logged:]; rest != "" {
						t.Errorf("the killed source logged after SIGKILL:\n%s", rest)
					}
					if !errors.Is(src.p.Err(), ErrKilled) {
						t.Errorf("killed source exit: %v, want %v", src.p.Err(), ErrKilled)
					}
				} else if err := src.p.Terminate(context.Background()); err != nil {
					t.Errorf("source exit after SIGTERM: %v, want a clean exit", err)
				}
				if d := time.Since(t0); d > time.Second {
					t.Errorf("the source took %v to exit", d)
				}
				// The decoder learns at its next step.
				waitLog(t, dec.engineProc, "peer "+src.p2pID()+" "+tt.wantLog, 2*vTick)
				log := src.log.String()
				if clean := strings.Contains(log, "engine core shutting down on signal") ||
					strings.Contains(log, "front end closed the link: engine core shutting down"); clean == tt.kill {
					t.Errorf("source's core logged a clean shutdown: %v, want %v:\n%s", clean, !tt.kill, log)
				}
				for i, p := range prompts {
					// A refused connect kills the new session at once: main
					// waits for the dial, refused at the next step, the fix
					// misses on the session still dialling; then a local
					// prefill.
					want := map[string]time.Duration{"wait": vTick + vMissCost, "prefill": vMissCost}[tt.mode]
					r := pull(vc.c, dec.engineProc, src.engineProc, p)
					if r.err != nil || r.status != http.StatusOK || r.cached != 0 || !atStep(r.latency, want) {
						t.Errorf("pull %d: status %d cached %d in %v err %v, want 200 and a local prefill in %v (to the step)", i, r.status, r.cached, r.latency, r.err, want)
					}
					time.Sleep(vEvery)
				}
				if !strings.Contains(dec.log.String(), "peer "+src.p2pID()+" down: connection refused") {
					t.Errorf("decoder log lacks the refused connect")
				}
				vc.restart(src)
				// Main waits for the new session's handshake; the fix misses
				// on it at once and hits from the next pull on.
				for i, want := range map[string][]bool{"wait": {true}, "prefill": {false, true}}[tt.mode] {
					p := words(fmt.Sprint("after-restart-", i), 400)
					seed(t, vc.c, src.engineProc, p)
					if r := pull(vc.c, dec.engineProc, src.engineProc, p); r.status != http.StatusOK || (r.cached > 0) != want {
						t.Errorf("pull %d from the restarted source: status %d cached %d err %v, want a hit: %v", i, r.status, r.cached, r.err, want)
					}
				}
			})
		})
	}
}
