package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pdKVConfig is the launch script's --kv-transfer-config with a free P2P
// port and kv_load_failure_policy recompute (what p2pfault launches).
const pdKVConfig = `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_load_failure_policy":"recompute","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":4294967296,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":0}]}}`

// pdLegs sends one request the way vLLM's p2p_connector_proxy.py does in
// PD mode: the prefill leg (remote_decoder, max_tokens 1, stream false) to
// the prefiller and the client's request with remote_prefiller to the
// decoder, the decode leg first when decoderFirst. It returns the decode
// leg's status and body.
func pdLegs(t *testing.T, c *http.Client, pre, dec *engineProc, path string, body map[string]any, id string, decoderFirst bool) (int, string) {
	t.Helper()
	prefill := map[string]any{}
	for k, v := range body {
		prefill[k] = v
	}
	prefill["kv_transfer_params"] = map[string]any{"remote_decoder": map[string]any{"kv_request_id": id}}
	prefill["stream"] = false
	prefill["max_tokens"] = 1
	delete(prefill, "stream_options")
	decode := map[string]any{}
	for k, v := range body {
		decode[k] = v
	}
	decode["kv_transfer_params"] = map[string]any{"remote_prefiller": map[string]any{
		"kv_request_id": id, "remote_host": pre.p2pHost, "remote_port": pre.p2pPort}}
	post := func(url string, v map[string]any) (int, string, error) {
		b, _ := json.Marshal(v)
		req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", id)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw), err
	}
	type answer struct {
		status int
		body   string
		err    error
	}
	decoded := make(chan answer, 1)
	runDecode := func() {
		s, b, err := post(dec.url, decode)
		decoded <- answer{s, b, err}
	}
	if decoderFirst {
		go runDecode()
	}
	if s, b, err := post(pre.url, prefill); err != nil || s != http.StatusOK {
		t.Fatalf("prefill leg: status %d err %v body %s", s, err, b)
	}
	if !decoderFirst {
		go runDecode()
	}
	a := <-decoded
	if a.err != nil {
		t.Fatalf("decode leg: %v", a.err)
	}
	return a.status, a.body
}

// cachedTokens reads usage.prompt_tokens_details.cached_tokens from a plain
// answer or from the usage chunk of a stream.
func cachedTokens(t *testing.T, body string, stream bool) int {
	t.Helper()
	var u struct {
		Usage *struct {
			Details *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if !stream {
		if err := json.Unmarshal([]byte(body), &u); err != nil || u.Usage == nil || u.Usage.Details == nil {
			t.Fatalf("answer without usage.prompt_tokens_details: %v: %s", err, body)
		}
		return u.Usage.Details.Cached
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		u.Usage = nil
		if json.Unmarshal([]byte(data), &u) == nil && u.Usage != nil && u.Usage.Details != nil {
			return u.Usage.Details.Cached
		}
	}
	t.Fatalf("stream without a usage chunk: %s", body)
	return 0
}

func TestPDLegsAsVLLMsProxySendsThem(t *testing.T) {
	opts := engineOpts{noP2P: true, args: []string{"--kv-transfer-config", pdKVConfig}}
	pre := startEngine(t, "prefiller", opts)
	dec := startEngine(t, "decoder", opts)
	c := newClient(20 * time.Second)
	n := 0
	for _, order := range []struct {
		name         string
		decoderFirst bool
	}{{"prefiller-first", false}, {"decoder-first", true}} {
		for _, tt := range []struct {
			name   string
			path   string
			stream bool
			chat   bool
		}{
			{"completion", "/v1/completions", false, false},
			{"streamed completion", "/v1/completions", true, false},
			{"chat", "/v1/chat/completions", false, true},
			{"streamed chat", "/v1/chat/completions", true, true},
		} {
			t.Run(order.name+"/"+tt.name, func(t *testing.T) {
				n++
				text := words(fmt.Sprintf("pd-%s-%d", order.name, n), 300)
				body := map[string]any{"model": "m", "max_tokens": 4, "temperature": 0}
				if tt.chat {
					body["messages"] = []map[string]any{{"role": "user", "content": text}}
				} else {
					body["prompt"] = text
				}
				if tt.stream {
					body["stream"] = true
					body["stream_options"] = map[string]any{"include_usage": true}
				}
				status, got := pdLegs(t, c, pre, dec, tt.path, body, fmt.Sprintf("pd-id-%d", n), order.decoderFirst)
				if status != http.StatusOK {
					t.Fatalf("decode leg: status %d: %s", status, got)
				}
				// 300 words: 2 full blocks of 128 (chat adds its template's tokens).
				if cached := cachedTokens(t, got, tt.stream); cached != 256 {
					t.Errorf("decode leg cached %d tokens, want 256: %s", cached, got)
				}
			})
		}
	}
	if log := pre.log.String(); strings.Contains(log, "timed out") || strings.Contains(log, "refused") {
		t.Errorf("prefiller log shows a timeout or a refusal:\n%s", log)
	}
}

// pdScale compresses time tenfold: heartbeat 0.2 s / 1 s, handshake 3 s,
// load timeout 3 s, abort-ack 1 s, store timeout 3 s, unbound store 6 s.
const pdScale = "0.1"

// TestPDStoppedPrefiller: decode legs naming a SIGSTOPped prefiller, at the
// proportions of vLLM's defaults. The mechanisms (sim/MODEL.md, "PD mode")
// say which deadline ends each one:
//   - a load in flight on the ready session when the prefiller stops ends
//     on the heartbeat (≈ 1–1.2 s here, 10–12 s at real time): the session
//     dies before the 3 s load timeout could send its abort;
//   - a decode leg sent after that opens a new session, whose connect the
//     stopped kernel accepts and nobody acks; at SIGCONT the stale route
//     drops it, so the leg ends at that session's handshake deadline, 3 s
//     (30 s) after it opened — not at SIGCONT, and never at load timeout +
//     abort-ack (the session dies first: it opened no later than the load);
//   - the next decode leg opens a session that is acked: it hits.
//
// Every failed load prefills locally (kv_load_failure_policy recompute).
func TestPDStoppedPrefiller(t *testing.T) {
	const (
		hbLo      = 800 * time.Millisecond // heartbeat timeout − one ping interval
		loadTO    = 3 * time.Second
		handshake = 3 * time.Second
		stall     = 3 * time.Second
		slack     = 1500 * time.Millisecond // a loaded 2-core machine
	)
	opts := engineOpts{noP2P: true, scale: pdScale, args: []string{"--kv-transfer-config", pdKVConfig, "--sim-freeze-gap", "1s"}}
	pre := startEngine(t, "prefiller", opts)
	dec := startEngine(t, "decoder", opts)
	c := newClient(30 * time.Second)
	body := func(p string) map[string]any {
		return map[string]any{"model": "m", "prompt": p, "max_tokens": 1, "temperature": 0}
	}
	// Warm the session with one exchange.
	if s, b := pdLegs(t, c, pre, dec, "/v1/completions", body(words("pd-warm", 400)), "pd-warm", false); s != http.StatusOK || cachedTokens(t, b, false) != 384 {
		t.Fatalf("warm-up exchange: status %d %s", s, b)
	}
	// The prefill legs of the stalled decode legs run before the stop.
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

	members := pre.members(t)
	t0 := time.Now()
	pre.signal(t, syscall.SIGSTOP)
	waitState(t, "T", members...)
	cont := time.AfterFunc(stall, func() { _ = syscall.Kill(-pre.pid, syscall.SIGCONT) })
	t.Cleanup(func() { cont.Stop(); _ = syscall.Kill(-pre.pid, syscall.SIGCONT) })

	var wg sync.WaitGroup
	var inFlight, reconnect result
	var reconnectAt, inFlightSent time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		inFlightSent = time.Since(t0)
		inFlight = postCompletion(c, dec.url, decode(0, prompts[0]))
	}()
	// The second leg waits until the heartbeat has reaped the first
	// session, as the decoder's log says.
	waitLog(t, dec, "heartbeat timed out", 10*time.Second)
	reconnectAt = time.Since(t0)
	if reconnectAt >= stall-500*time.Millisecond {
		t.Fatalf("the heartbeat reaped the session %v after the stop: want about 1–1.2 s, well before SIGCONT at %v", reconnectAt, stall)
	}
	reconnect = postCompletion(c, dec.url, decode(1, prompts[1]))
	wg.Wait()

	t.Logf("in-flight decode leg: %.2fs (status %d, cached %d); heartbeat reaped the session %.2fs after the stop; reconnect decode leg sent at %.2fs took %.2fs (status %d, cached %d)",
		inFlight.latency.Seconds(), inFlight.status, inFlight.cached, reconnectAt.Seconds(), reconnectAt.Seconds(), reconnect.latency.Seconds(), reconnect.status, reconnect.cached)
	if inFlight.status != http.StatusOK || inFlight.cached != 0 {
		t.Errorf("in-flight decode leg: status %d cached %d, want 200 with a local prefill: %s", inFlight.status, inFlight.cached, inFlight.body)
	}
	// Lower bounds are asked of the client's latency (a deadline cannot
	// fire early), upper bounds of the decoder's own time for the request
	// (X-Sim-Service-Time), which a loaded client cannot stretch.
	lateInFlight := false
	if inFlight.latency < hbLo || inFlight.serviceTime >= loadTO {
		// A starved test can send the "in-flight" leg only after the
		// heartbeat reaped the session (the decoder got it more than hbLo
		// after the stop): it then meets the reconnect's handshake, and is
		// judged as the reconnect leg below rather than failed for which
		// of the test and the decoder's heartbeat ran first.
		arrived := inFlightSent + inFlight.latency - inFlight.serviceTime
		if arrived > hbLo && inFlight.latency >= handshake && inFlight.serviceTime <= handshake+slack {
			lateInFlight = true
		} else {
			t.Errorf("in-flight decode leg took %v (%v in the decoder, which got it %v after the stop): want the heartbeat, in [%v, %v) — before the load timeout", inFlight.latency, inFlight.serviceTime, arrived, hbLo, loadTO)
		}
	}
	if reconnect.status != http.StatusOK || reconnect.cached != 0 {
		t.Errorf("reconnect decode leg: status %d cached %d, want 200 with a local prefill: %s", reconnect.status, reconnect.cached, reconnect.body)
	}
	if reconnect.latency < handshake || reconnect.serviceTime > handshake+slack {
		t.Errorf("reconnect decode leg (sent %v after the stop) took %v (%v in the decoder): want its session's handshake timeout, %v", reconnectAt, reconnect.latency, reconnect.serviceTime, handshake)
	}
	defer func() {
		if lateInFlight && !t.Failed() {
			t.Skipf("the machine sent the in-flight leg only after the heartbeat reaped its session (%v after the stop): it met the reconnect's handshake as the reconnect leg did; the heartbeat's reap of an in-flight load was not judged", inFlightSent)
		}
	}()
	log := dec.log.String()
	if !strings.Contains(log, "P2PSession "+pre.p2pID()+": handshake timed out") || strings.Contains(log, "sending abort") {
		t.Errorf("decoder log: want the handshake deadline and no load-timeout abort:\n%s", log)
	}
	if !strings.Contains(pre.log.String(), "routed to a stale connection and dropped") {
		t.Errorf("prefiller log lacks the stale route's dropped connect:\n%s", pre.log)
	}
	// After the reconnect's death the next session is acked: PD hits again.
	if s, b := pdLegs(t, c, pre, dec, "/v1/completions", body(words("pd-after", 400)), "pd-after", false); s != http.StatusOK || cachedTokens(t, b, false) != 384 {
		t.Errorf("decode leg after the stall: status %d %s, want a hit of 384", s, b)
	}
}
