package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
