package sim

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Compressed time for the fault tests: --sim-time-scale 0.1 makes the
// lookup timeout 0.8 s, the handshake timeout 3 s, the heartbeat 0.2/1 s;
// the stall lasts 30 s × 0.1 and pulls go every 0.5 s × 0.1, as in the seed.
const (
	faultScale = "0.1"
	lookupTO   = 800 * time.Millisecond
	// The lookup deadline counts from the source's last frame, which is at
	// most one heartbeat interval (2 s × 0.1) before the stop: the session
	// is reaped between lookupTO − heartbeatIvl and lookupTO after it.
	heartbeatIvl = 200 * time.Millisecond
	handshakeTO  = 3 * time.Second
	stallFor     = 3 * time.Second
	pullEvery    = 50 * time.Millisecond
)

// sample is one pull during a fault run; times are since the SIGSTOP.
type sample struct {
	source     int
	start, end time.Duration
	r          result
}

// timed places r on the timeline that starts at t0, by the instant the
// request went out (result.sent). A clock read in the pulling goroutine
// before the call is not that instant: on a loaded machine the goroutine
// can wait a second to run between the two, and a start taken from it put
// a pull's end a second before the decoder answered it.
func timed(source int, t0 time.Time, r result) sample {
	start := r.sent.Sub(t0)
	return sample{source: source, start: start, end: start + r.latency, r: r}
}

func (s sample) String() string {
	return fmt.Sprintf("source %d pull at %.2fs → %.2fs (%.2fs, service %.2fs) status %d cached %d err %v",
		s.source, s.start.Seconds(), s.end.Seconds(), (s.end - s.start).Seconds(), s.r.serviceTime.Seconds(), s.r.status, s.r.cached, s.r.err)
}

// The latencies of a stalled, killed or removed source are judged on
// in-process engines at real time (fault_virtual_test.go). What only a real
// process shows is judged here, at compressed time, with no latency bound a
// loaded machine could break: a signal to the session reaches both its
// processes, the engine core included, and what each signal does to them.

// TestSIGSTOPReachesTheWholeSession: the seed's stall stops the front end
// and its engine core (the core, which owns the P2P socket, is a child in
// the front end's session); the decoder stops getting hits from it, and
// after SIGCONT the core sees the gap it was frozen and serves again.
func TestSIGSTOPReachesTheWholeSession(t *testing.T) {
	opts := engineOpts{scale: faultScale, args: []string{"--sim-freeze-gap", "1s"}}
	src := startEngine(t, "source-0", opts)
	dec := startEngine(t, "decoder", opts)
	c := newClient(20 * time.Second)
	warm(t, c, dec, src)
	p := words("sigstop", 400)
	seed(t, c, src, p)
	members := src.members(t)
	if len(members) != 2 {
		t.Fatalf("source 0's session has %d processes %v, want front end and core", len(members), members)
	}
	src.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(-src.pid, syscall.SIGCONT) })
	waitState(t, "T", members...)
	if r := pull(c, dec, src, p); r.status != http.StatusOK || r.cached != 0 {
		t.Errorf("pull naming the stopped source: status %d cached %d err %v, want 200 and a local prefill", r.status, r.cached, r.err)
	}
	// Stopped for twice the freeze gap (1 s), so the core sees it.
	time.Sleep(time.Until(stopped.Add(2 * time.Second)))
	src.signal(t, syscall.SIGCONT)
	waitLog(t, src, "engine resumed after", 5*time.Second)
	for _, pid := range members {
		if st := procState(t, pid); st == "T" {
			t.Errorf("process %d still stopped after SIGCONT", pid)
		}
	}
	hitsAgain(t, c, dec, src, handshakeTO+10*time.Second)
	if !strings.Contains(dec.log.String(), "peer "+src.p2pID()+" down") {
		t.Errorf("the decoder never noticed the stop:\n%s", dec.log)
	}
}

// hitsAgain pulls fresh prompts from a resumed src until one hits, within.
func hitsAgain(t *testing.T, c *http.Client, dec, src *engineProc, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i := 0; ; i++ {
		p := words(fmt.Sprint("after-cont-", i), 400)
		seed(t, c, src, p)
		if r := pull(c, dec, src, p); r.cached > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("pulls naming the resumed source never hit again")
		}
		time.Sleep(pullEvery)
	}
}

// TestKillOrRemoveASource: SIGKILL ends the whole session at once, SIGTERM
// reaches the core too, which shuts down cleanly and tells its peers.
func TestKillOrRemoveASource(t *testing.T) {
	tests := []struct {
		sig     syscall.Signal
		wantLog string // on the decoder: how it learnt
		cleanFE bool   // the source's front end exits 0
	}{
		{syscall.SIGKILL, "down: connection", false},
		{syscall.SIGTERM, "down: connection closed by peer", true}, // its ROUTER closes: EVENT_DISCONNECTED
	}
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			opts := engineOpts{scale: faultScale}
			src := startEngine(t, "source-0", opts)
			dec := startEngine(t, "decoder", opts)
			c := newClient(20 * time.Second)
			warm(t, c, dec, src)
			p := words(fmt.Sprint("signal-", tt.sig), 400)
			seed(t, c, src, p)

			src.signal(t, tt.sig)
			select {
			case <-src.exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("source front end did not exit after %v", tt.sig)
			}
			waitSessionGone(t, src.pid)
			if ok := src.waitErr == nil; ok != tt.cleanFE {
				t.Errorf("source front end exit: %v, want clean exit: %v", src.waitErr, tt.cleanFE)
			}
			waitLog(t, dec, "peer "+src.p2pID()+" "+tt.wantLog, 5*time.Second)
			if r := pull(c, dec, src, p); r.err != nil || r.status != http.StatusOK || r.cached != 0 {
				t.Errorf("pull: status %d cached %d err %v, want 200 and a local prefill", r.status, r.cached, r.err)
			}
			waitLog(t, dec, "peer "+src.p2pID()+" down: connection refused", 5*time.Second)
			if tt.cleanFE {
				// The session's SIGTERM reaches the front end and the core
				// together: the core stops on its own signal or on the front
				// end closing the link, whichever comes first. Either way it
				// shuts down cleanly rather than being killed.
				if log := src.log.String(); !strings.Contains(log, "engine core shutting down on signal") &&
					!strings.Contains(log, "front end closed the link: engine core shutting down") {
					t.Errorf("source-0's core did not log a clean shutdown:\n%s", log)
				}
			}
		})
	}
}

func TestStopOneMemberOfASource(t *testing.T) {
	const L, H = lookupTO - heartbeatIvl, handshakeTO // L: the earliest the lookup deadline can reap
	tests := []struct {
		name string
		run  func(t *testing.T, c *http.Client, src, dec *engineProc, prompt string)
	}{
		{"stopping only the engine core: health still answers, completions hang, P2P stalls", func(t *testing.T, c *http.Client, src, dec *engineProc, prompt string) {
			core := src.core(t)
			if err := syscall.Kill(core, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(core, syscall.SIGCONT) })
			waitState(t, "T", core)
			if st := procState(t, src.pid); st == "T" {
				t.Fatalf("front end is stopped too (state %s)", st)
			}
			// As a source it answers no lookup: the decoder reaps the
			// session on the lookup timeout and prefills, as in a stall. The
			// pull goes first, before the heartbeat (1 s) could reap it.
			pulled := make(chan result, 1)
			go func() { pulled <- pull(c, dec, src, prompt) }()
			if resp, err := newClient(2 * time.Second).Get(src.url + "/health"); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("/health with the core stopped: %v %v, want 200 (the API server does not notice)", resp, err)
			} else {
				resp.Body.Close()
			}
			short := newClient(time.Second)
			if r := postCompletion(short, src.url, map[string]any{"model": "m", "prompt": words("hang", 10), "max_tokens": 1}); r.err == nil {
				t.Errorf("a completion on the engine with its core stopped answered %d, want it to hang", r.status)
			}
			r := <-pulled
			// The deadline counts from the core's last frame, at most a
			// heartbeat interval before the stop (L), and the pull reaches
			// the decoder some time after the stop: up to 300 ms of that
			// is allowed for a loaded machine.
			if r.status != http.StatusOK || r.cached != 0 || r.serviceTime < L-300*time.Millisecond || r.serviceTime > L+2*time.Second {
				t.Errorf("pull naming it: status %d cached %d in %v, want 200, 0, after the lookup timeout (%v at the soonest, less the pull's way there)", r.status, r.cached, r.serviceTime, L)
			}
			waitLog(t, dec, "lookup on "+src.p2pID()+" timed out", 5*time.Second)
			if err := syscall.Kill(core, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// Resumed, it serves again once a reconnect gets through.
			hitsAgain(t, c, dec, src, H+5*time.Second)
		}},
		{"stopping only the front end: HTTP hangs, the core still serves P2P", func(t *testing.T, c *http.Client, src, dec *engineProc, prompt string) {
			core := src.core(t)
			if err := syscall.Kill(src.pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(src.pid, syscall.SIGCONT) })
			waitState(t, "T", src.pid)
			if st := procState(t, core); st == "T" {
				t.Fatalf("engine core is stopped too (state %s)", st)
			}
			if resp, err := newClient(time.Second).Get(src.url + "/health"); err == nil {
				resp.Body.Close()
				t.Errorf("/health answered %d with the front end stopped, want it to hang", resp.StatusCode)
			}
			r := pull(c, dec, src, prompt)
			if r.status != http.StatusOK || r.cached != 384 || r.serviceTime >= L {
				t.Errorf("pull naming it: status %d cached %d in %v, want 200 and 384 at once", r.status, r.cached, r.serviceTime)
			}
			if err := syscall.Kill(src.pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			get(t, c, src.url+"/health")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := engineOpts{scale: faultScale, args: []string{"--sim-freeze-gap", "1s"}}
			src := startEngine(t, "source-0", opts)
			dec := startEngine(t, "decoder", opts)
			c := newClient(20 * time.Second)
			warm(t, c, dec, src)
			p := words(strings.ReplaceAll(tt.name, " ", "_"), 400)
			seed(t, c, src, p)
			tt.run(t, c, src, dec, p)
		})
	}
}

func TestOneMemberDying(t *testing.T) {
	tests := []struct {
		name   string
		victim func(t *testing.T, e *engineProc) int
		check  func(t *testing.T, e *engineProc)
	}{
		{"the core killed: the front end logs an ERROR and exits 1", func(t *testing.T, e *engineProc) int { return e.core(t) },
			func(t *testing.T, e *engineProc) {
				select {
				case <-e.exited:
				case <-time.After(10 * time.Second):
					t.Fatal("front end still running after its core died")
				}
				var ee *exec.ExitError
				if !errors.As(e.waitErr, &ee) || ee.ExitCode() != 1 {
					t.Errorf("front end exit: %v, want exit status 1", e.waitErr)
				}
				waitLog(t, e, "ERROR", 5*time.Second)
				waitLog(t, e, "engine core died", 5*time.Second)
			}},
		{"the front end killed: its core follows (parent-death signal, link closed)", func(t *testing.T, e *engineProc) int { return e.pid },
			func(t *testing.T, e *engineProc) {
				waitSessionGone(t, e.pid)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startEngine(t, "engine", engineOpts{})
			if err := syscall.Kill(tt.victim(t, e), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			tt.check(t, e)
		})
	}
}
