package sim

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestVirtualPDStoppedPrefiller is TestPDStoppedPrefiller on in-process
// engines at real time (vLLM's timeouts, the seed's 30 s stall) on the fake
// clock, where its figures are exact to the step.
func TestVirtualPDStoppedPrefiller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			hbIvl, hbTO = 2 * time.Second, 10 * time.Second // --sim-heartbeat-interval, -timeout
			loadTO      = 30 * time.Second                  // --sim-load-timeout
			H           = vHandshakeTO
			stall       = vStall
		)
		vc := newVCluster(t)
		opts := engineOpts{noP2P: true, args: []string{"--kv-transfer-config", pdKVConfig}}
		pre := vc.start("prefiller", opts)
		dec := vc.start("decoder", opts)
		c := vc.c
		body := func(p string) map[string]any {
			return map[string]any{"model": "m", "prompt": p, "max_tokens": 1, "temperature": 0}
		}
		if s, b := pdLegs(t, c, pre.engineProc, dec.engineProc, "/v1/completions", body(words("pd-warm", 400)), "pd-warm", false); s != http.StatusOK || cachedTokens(t, b, false) != 384 {
			t.Fatalf("warm-up exchange: status %d %s", s, b)
		}
		prompts := []string{words("pd-stop-a", 400), words("pd-stop-b", 400)}
		for i, p := range prompts {
			prefill := body(p)
			prefill["kv_transfer_params"] = map[string]any{"remote_decoder": map[string]any{"kv_request_id": fmt.Sprint("pd-stop-", i)}}
			if r := postCompletion(c, pre.url, prefill); r.status != http.StatusOK {
				t.Fatalf("prefill leg %d: %d %s", i, r.status, r.body)
			}
		}
		decode := func(i int, p string) map[string]any {
			d := body(p)
			d["kv_transfer_params"] = map[string]any{"remote_prefiller": map[string]any{
				"kv_request_id": fmt.Sprint("pd-stop-", i), "remote_host": pre.p2pHost, "remote_port": pre.p2pPort}}
			return d
		}
		t0 := time.Now()
		pre.p.Freeze()
		time.AfterFunc(stall, pre.p.Thaw)
		var wg sync.WaitGroup
		var inFlight result
		wg.Add(1)
		go func() {
			defer wg.Done()
			inFlight = postCompletion(c, dec.url, decode(0, prompts[0]))
		}()
		// The second leg goes once the heartbeat has reaped the first
		// session: its reconnect lands in the frozen prefiller's backlog.
		waitLog(t, dec.engineProc, "heartbeat timed out", hbTO+hbIvl+time.Second)
		reapedAt := time.Since(t0)
		reconnect := postCompletion(c, dec.url, decode(1, prompts[1]))
		wg.Wait()
		t.Logf("in-flight decode leg: %v (cached %d); reaped %v after the stop; reconnect leg: %v (cached %d)",
			inFlight.latency, inFlight.cached, reapedAt, reconnect.latency, reconnect.cached)
		// The in-flight load ends on the heartbeat: a ping at most one
		// interval after the stop, dead hbTO later, before the load timeout.
		if inFlight.status != http.StatusOK || inFlight.cached != 0 || inFlight.latency < hbTO || inFlight.latency > hbTO+hbIvl+vMissCost {
			t.Errorf("in-flight decode leg: status %d cached %d in %v, want 200, a local prefill, in [%v, %v] (the heartbeat, before the load timeout %v): %s",
				inFlight.status, inFlight.cached, inFlight.latency, hbTO, hbTO+hbIvl+vMissCost, loadTO, inFlight.body)
		}
		if reapedAt > inFlight.latency {
			t.Errorf("the heartbeat reap was seen at %v, after the in-flight leg ended at %v", reapedAt, inFlight.latency)
		}
		// The reconnect's connect is dropped into the stale route at the
		// thaw: it runs to its handshake deadline, then prefills locally.
		if reconnect.status != http.StatusOK || reconnect.cached != 0 || !atStep(reconnect.latency, H+vMissCost) {
			t.Errorf("reconnect decode leg: status %d cached %d in %v, want 200 and a local prefill at its handshake deadline, %v (to the step): %s",
				reconnect.status, reconnect.cached, reconnect.latency, H+vMissCost, reconnect.body)
		}
		log := dec.log.String()
		if !strings.Contains(log, "P2PSession "+pre.p2pID()+": handshake timed out after 30.0s") || strings.Contains(log, "sending abort") {
			t.Errorf("decoder log: want the handshake deadline and no load-timeout abort:\n%s", log)
		}
		// Dropped by the sim's stale route, or by the prefiller's ROUTER
		// itself when the old connection's end is read after the new one's
		// handshake (libzmq router.cpp ignores a duplicate identity).
		if l := pre.log.String(); !strings.Contains(l, "routed to a stale connection and dropped") && !strings.Contains(l, "already routed to another connection") {
			t.Errorf("prefiller log lacks the stale route's dropped connect:\n%s", pre.log)
		}
		if s, b := pdLegs(t, c, pre.engineProc, dec.engineProc, "/v1/completions", body(words("pd-after", 400)), "pd-after", false); s != http.StatusOK || cachedTokens(t, b, false) != 384 {
			t.Errorf("decode leg after the stall: status %d %s, want a hit of 384", s, b)
		}
	})
}

// TestVirtualPlainClientSeesTheSeedsStall is TestAPlainClientSeesTheSeedsStall
// on in-process engines at the seed's real time (scale 1), where no loaded
// machine can move its figures: both arms give the seed's verdicts and
// figures to a plain client seeding with a 5 s timeout at 2 trials/s.
func TestVirtualPlainClientSeesTheSeedsStall(t *testing.T) {
	sched := plainSchedule{seedTimeout: 5 * time.Second, rate: 2}
	for _, mode := range []string{"wait", "prefill"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				vc := newVCluster(t)
				src0 := vc.start("source-0", engineOpts{})
				src1 := vc.start("source-1", engineOpts{})
				// As p2pfault's slice: a load cut by the stop prefills locally.
				kvc := strings.Replace(kvConfig, `"kv_connector_extra_config"`, `"kv_load_failure_policy":"recompute","kv_connector_extra_config"`, 1)
				dec := vc.start("decoder", engineOpts{mode: mode, noP2P: true, args: []string{"--kv-transfer-config", kvc}})
				row := plainRun(t, mode, sched, 1, plainCluster{src0: src0.engineProc, src1: src1.engineProc, dec: dec.engineProc,
					client: func(d time.Duration) *http.Client { return &http.Client{Timeout: d, Transport: vc.tr} },
					stop:   src0.p.Freeze, cont: src0.p.Thaw})
				t.Log(judgePlain(t, row, sched, 1))
			})
		})
	}
}
