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
	// tokens (26 µs each: 10.4 ms) and one decode token (2 ms), each ending
	// at a 5 ms step, plus the link's steps: 25 ms, the same every run.
	vMissCost = 25 * time.Millisecond
	// vHitCost bounds a pull that hits: lookup, fetch and transfer of 3
	// blocks over P2P, a few steps on each side (35-40 ms by the step a
	// pull starts at), and a step either way on each hop (atStep).
	vHitCost = 50 * time.Millisecond
	// vHandshakeCost bounds a new session's handshake that is answered:
	// dial, connect and connect_ack, a step or two on each side.
	vHandshakeCost = 20 * time.Millisecond
)

// atStep: got is want, exact to the scheduler step. A message that arrives
// at the very instant of its receiver's step is taken by that step or by
// the next, as the bubble runs the two goroutines in either order, and a
// pull may start between two steps; so a figure can be up to one tick
// shorter than the sum of its costs, never longer.
func atStep(got, want time.Duration) bool { return got >= want-vTick && got <= want }

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
	var s0 []sample
	for _, s := range samples {
		if s.r.err != nil || s.r.status != http.StatusOK {
			t.Fatalf("%v: want 200 (body %s)", s, s.r.body)
		}
		if s.source == 1 {
			// The healthy source keeps hitting at its own pace.
			if s.r.cached == 0 || s.end-s.start > vHitCost {
				t.Errorf("%v: want a hit within %v", s, vHitCost)
			}
			continue
		}
		s0 = append(s0, s)
	}
	// The pull in flight at the freeze ends when the lookup deadline reaps
	// the session: L after the source's last frame, which came at most one
	// heartbeat interval (and the steps of a ping's round trip) before.
	reap := s0[0].end - vMissCost
	if reap < L-vHeartbeatIvl-2*vTick || reap > L {
		t.Fatalf("the session was reaped %v after the freeze, want within [%v, %v]", reap, L-vHeartbeatIvl, L)
	}
	// Every pull sent before the reap misses, answered at the reap.
	var open time.Duration = -1 // the first pull after the reap: it opens the next session
	for _, s := range s0 {
		switch {
		case s.start < reap:
			if s.end != s0[0].end || s.r.cached != 0 {
				t.Errorf("%v: a pull in flight at the reap must miss at it (%v)", s, s0[0].end)
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
				if !atStep(s.end, deadline+vMissCost) {
					t.Errorf("%v: want it to wait for the handshake deadline and end at %v (to the step)", s, deadline+vMissCost)
				}
			case "prefill": // the fix: it misses at once
				if !atStep(s.end-s.start, vMissCost) {
					t.Errorf("%v: want a local prefill at once (%v, to the step)", s, vMissCost)
				}
			}
		case s.start > deadline+vMissCost:
			// The next handshake is answered: pulls hit again, the first
			// of them after that handshake.
			if s.r.cached == 0 || s.end-s.start > vHitCost+vHandshakeCost {
				t.Errorf("%v: after the handshake deadline, want a hit within %v", s, vHitCost+vHandshakeCost)
			}
			hits++
		}
	}
	if hits < 10 {
		t.Errorf("%d pulls hit after the handshake deadline, want ≥ 10", hits)
	}
	// The seed's faulted max: main waits out the handshake, the fix only
	// the lookup timeout.
	want := map[string]time.Duration{"wait": H + vMissCost, "prefill": s0[0].end}[mode]
	if !atStep(slowest, want) {
		t.Errorf("slowest pull naming the stopped source took %v, want %v (to the step)", slowest, want)
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
		{"wait", false, "down: peer disconnected"},
		{"prefill", false, "down: peer disconnected"},
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
