package probe_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"p2pfault/event"
	"p2pfault/probe"
)

// TestPDTrialsAreTheProxysTwoLegs: in mode pd each trial is what vLLM's
// p2p_connector_proxy.py sends in its default mode: the prefill leg to the
// source with remote_decoder {kv_request_id}, max_tokens 1 and stream
// false, then the decode leg to the decoder with remote_prefiller
// {kv_request_id, remote_host, remote_port} naming that source, one uuid4
// for both legs and as X-Request-Id on both.
func TestPDTrialsAreTheProxysTwoLegs(t *testing.T) {
	c := newFakeCluster(t, 2)
	cfg := c.config()
	cfg.Mode = event.ModePD
	cfg.Sources[1].P2PHost = "localhost" // verbatim, as in p2p mode
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	time.Sleep(200 * time.Millisecond)
	got := r.stop(10 * time.Second)
	seeds, pulls := c.recorded()
	if len(got) < 6 || len(pulls) != len(got) || len(seeds) != len(got) {
		t.Fatalf("%d samples, %d decode legs, %d prefill legs: want the same number, at least 6", len(got), len(pulls), len(seeds))
	}
	prefillByPrompt := map[string]request{}
	for _, s := range seeds {
		prefillByPrompt[s.prompt] = s
		if keys := slices.Sorted(maps.Keys(s.body)); !slices.Equal(keys, []string{"kv_transfer_params", "max_tokens", "model", "prompt", "stream", "temperature"}) {
			t.Errorf("prefill leg keys %v", keys)
		}
		if s.body["max_tokens"] != 1.0 || s.body["stream"] != false {
			t.Errorf("prefill leg max_tokens %v stream %v, want 1 and false", s.body["max_tokens"], s.body["stream"])
		}
		kv := s.body["kv_transfer_params"].(map[string]any)
		if keys := slices.Sorted(maps.Keys(kv)); !slices.Equal(keys, []string{"remote_decoder"}) {
			t.Errorf("prefill leg kv_transfer_params keys %v, want [remote_decoder]", keys)
		}
	}
	ids := map[string]bool{}
	for _, pl := range pulls {
		pre, ok := prefillByPrompt[pl.prompt]
		if !ok {
			t.Errorf("decode leg with a prompt no prefill leg carried")
			continue
		}
		kv := pl.body["kv_transfer_params"].(map[string]any)
		if keys := slices.Sorted(maps.Keys(kv)); !slices.Equal(keys, []string{"remote_prefiller"}) {
			t.Errorf("decode leg kv_transfer_params keys %v, want [remote_prefiller]", keys)
			continue
		}
		rp := kv["remote_prefiller"].(map[string]any)
		id := rp["kv_request_id"].(string)
		if u, err := uuid.Parse(id); err != nil || u.Version() != 4 {
			t.Errorf("kv_request_id %q is not a uuid4 (%v)", id, err)
		}
		if ids[id] {
			t.Errorf("kv_request_id %s used by two trials", id)
		}
		ids[id] = true
		preID := pre.body["kv_transfer_params"].(map[string]any)["remote_decoder"].(map[string]any)["kv_request_id"]
		if preID != id {
			t.Errorf("prefill leg's kv_request_id %v, decode leg's %s: want one id for both legs", preID, id)
		}
		if pre.header.Get("X-Request-Id") != id || pl.header.Get("X-Request-Id") != id {
			t.Errorf("X-Request-Id %q (prefill) and %q (decode), want %s on both", pre.header.Get("X-Request-Id"), pl.header.Get("X-Request-Id"), id)
		}
		if want := basePort + pre.source; rp["remote_port"] != float64(want) || rp["remote_host"] != cfg.Sources[pre.source].P2PHost {
			t.Errorf("decode leg names %v:%v, its prefill leg went to source %d (%s:%d)", rp["remote_host"], rp["remote_port"], pre.source, cfg.Sources[pre.source].P2PHost, want)
		}
		if !pl.at.After(pre.at) {
			t.Errorf("decode leg sent at %v, before its prefill leg at %v (the proxy's default order is prefiller first)", pl.at, pre.at)
		}
	}
	for _, s := range got {
		if !s.Hit() {
			t.Errorf("trial %d: status %d cached %d, want a hit", s.Trial, s.Status, s.CachedTokens)
		}
		if want := cfg.Sources[s.Source].P2PHost; !strings.HasPrefix(s.Peer, want+":") {
			t.Errorf("trial %d: sample peer %q, want the source's P2P address", s.Trial, s.Peer)
		}
		// The sample carries the id the decode leg sent: the one the
		// decoder's log lines name (package cause matches by it).
		if !ids[s.KVRequestID] {
			t.Errorf("trial %d: sample kv_request_id %q, not one a decode leg sent", s.Trial, s.KVRequestID)
		}
	}
}

// TestPDDecodeLegGoesOutWhenThePrefillLegFails: vLLM's proxy would wait for
// a prefill leg that does not answer (its client has no timeout); the probe
// gives it the seed timeout and sends the decode leg anyway, so the
// decoder's behaviour against a stopped prefiller is still measured.
func TestPDDecodeLegGoesOutWhenThePrefillLegFails(t *testing.T) {
	for _, m := range []mode{modeHang, mode500} {
		t.Run(string(m), func(t *testing.T) {
			c := newFakeCluster(t, 1)
			c.setSeedMode(0, m)
			cfg := c.config()
			cfg.Mode = event.ModePD
			cfg.SeedTimeout = 200 * time.Millisecond
			s := oneTrial(t, cfg)
			if s.SeedErr == "" {
				t.Errorf("prefill leg error is empty, want why it failed")
			}
			if m == modeHang && (s.SeedLatency < 150*time.Millisecond || s.SeedLatency > 2*time.Second) {
				t.Errorf("prefill leg took %v, want about the 200ms seed timeout", s.SeedLatency)
			}
			if s.Status != http.StatusOK || s.CachedTokens != 0 {
				t.Errorf("decode leg: status %d cached %d, want 200 and a local prefill (nothing was parked)", s.Status, s.CachedTokens)
			}
			_, pulls := c.recorded()
			if len(pulls) != 1 {
				t.Fatalf("%d decode legs, want 1", len(pulls))
			}
			if _, ok := pulls[0].body["kv_transfer_params"].(map[string]any)["remote_prefiller"]; !ok {
				t.Errorf("decode leg without remote_prefiller: %v", pulls[0].body)
			}
		})
	}
}

func TestProbeAgainstSimEnginesInPDMode(t *testing.T) {
	decoder, sources := simCluster(t, 2)
	p, err := probe.New(probe.Config{
		DecoderURL: decoder.url, Sources: sources, Model: "m", Mode: event.ModePD,
		Interval: 50 * time.Millisecond, SeedTimeout: 5 * time.Second, PullTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	if err := p.Warmup(context.Background(), 20*time.Second); err != nil {
		t.Fatalf("Warmup against sim engines in pd mode: %v", err)
	}
	r := startRun(t, p)
	time.Sleep(500 * time.Millisecond)
	got := r.stop(20 * time.Second)
	if len(got) < 10 {
		t.Fatalf("%d trials in 500ms at 2 sources × 20/s, want about 20", len(got))
	}
	for _, s := range got {
		// The prefill leg parked 3 whole blocks; the decode leg fetched them.
		if !s.Hit() || s.CachedTokens != 384 || s.Err != "" || s.SeedErr != "" || s.SeedStatus != http.StatusOK {
			t.Errorf("source %d trial %d: prefill %d %q, decode %d cached %d err %q, want a 384-token hit",
				s.Source, s.Trial, s.SeedStatus, s.SeedErr, s.Status, s.CachedTokens, s.Err)
		}
	}
}

// TestReaddressNamesOnlyTheNewAddress: once Readdress returns, no pull sent
// at or after its Switch.At names the old address, and a trial whose first
// leg went to the old engine sends it again to the new one, so its two legs
// name one engine, in both modes.
//
// On the fake clock (a bubble): which trials fall before and after the
// switch is the schedule's, not the machine's load.
func TestReaddressNamesOnlyTheNewAddress(t *testing.T) {
	for _, md := range []string{event.ModeP2P, event.ModePD} {
		t.Run(md, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testReaddressNamesOnlyTheNewAddress(t, md) })
		})
	}
}

func testReaddressNamesOnlyTheNewAddress(t *testing.T, md string) {
	c := newVirtualCluster(t, 2)
	// The new engine of source 0: a third fake source, P2P port basePort+2.
	replacement := c.serve("source-2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serveSource(2, w, r) }), nil)
	// The old engine is gone: its first legs hang until the seed
	// timeout, so a trial is caught between its legs by the switch.
	c.setSeedMode(0, modeHang)
	cfg := c.config()
	cfg.Mode = md
	cfg.SeedTimeout = 500 * time.Millisecond
	cfg.Interval = 100 * time.Millisecond
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	time.Sleep(750 * time.Millisecond) // between source 0's slots: the switch and a slot are not one instant
	synctest.Wait()
	newSrc := probe.Source{Index: 0, URL: replacement.URL, P2PHost: "127.0.0.1", P2PPort: basePort + 2}
	sw, err := p.Readdress(newSrc)
	if err != nil || !sw.Changed {
		t.Fatalf("Readdress: %+v, %v", sw, err)
	}
	if sw.Prev != "127.0.0.1:7777" || sw.Peer != "127.0.0.1:7779" {
		t.Errorf("switch from %s to %s, want 127.0.0.1:7777 to 127.0.0.1:7779", sw.Prev, sw.Peer)
	}
	if again, _ := p.Readdress(newSrc); again.Changed {
		t.Errorf("a second Readdress to the same address changed it: %+v", again)
	}
	time.Sleep(1500 * time.Millisecond)
	got := r.stop(10 * time.Second)
	at := sw.At.Sub(r.t0)
	var after, oldBefore int
	for _, s := range got {
		if s.Source != 0 {
			continue
		}
		if s.Start < at {
			if s.Peer == sw.Prev {
				oldBefore++
			}
			continue
		}
		after++
		if s.Peer != sw.Peer {
			t.Errorf("trial %d sent %v after the switch (at %v) names %s, want %s", s.Trial, s.Start, at, s.Peer, sw.Peer)
		}
		if !s.Hit() {
			t.Errorf("trial %d after the switch: status %d cached %d seed %q: want a hit on the new engine", s.Trial, s.Status, s.CachedTokens, s.SeedErr)
		}
	}
	if oldBefore == 0 || after < 5 {
		t.Fatalf("%d pulls named the old address before the switch, %d were sent after: want some of each", oldBefore, after)
	}
	if got := p.Config().Sources[0]; got != newSrc {
		t.Errorf("Config().Sources[0] = %+v, want the new address %+v", got, newSrc)
	}
}

func TestReaddressRejectsBadAddresses(t *testing.T) {
	c := newFakeCluster(t, 1)
	p, err := probe.New(c.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	for _, s := range []probe.Source{
		{Index: 5, URL: "http://127.0.0.1:1", P2PHost: "127.0.0.1", P2PPort: 1},
		{Index: 0, URL: "ftp://x", P2PHost: "127.0.0.1", P2PPort: 1},
		{Index: 0, URL: "http://127.0.0.1:1", P2PHost: "", P2PPort: 1},
		{Index: 0, URL: "http://127.0.0.1:1", P2PHost: "127.0.0.1", P2PPort: 70000},
	} {
		if _, err := p.Readdress(s); err == nil {
			t.Errorf("Readdress(%+v) = nil error", s)
		} else if !strings.Contains(err.Error(), "source") {
			t.Errorf("Readdress(%+v): %v: want the source named", s, err)
		}
	}
}

func TestNewRejectsAnUnknownMode(t *testing.T) {
	c := newFakeCluster(t, 1)
	cfg := c.config()
	cfg.Mode = "nixl"
	if _, err := probe.New(cfg); err == nil || !strings.Contains(err.Error(), `mode "nixl": want p2p or pd`) {
		t.Errorf("New with mode nixl: %v", err)
	}
}
