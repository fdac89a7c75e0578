package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestThreeEnginesPullOverP2P(t *testing.T) {
	src0 := startEngine(t, "source-0", engineOpts{})
	src1 := startEngine(t, "source-1", engineOpts{})
	dec := startEngine(t, "decoder", engineOpts{})
	c := newClient(10 * time.Second)

	tests := []struct {
		name       string
		seedOn     *engineProc // nil: the prompt is seeded nowhere
		pullFrom   *engineProc
		dec        *engineProc
		wantCached int
	}{
		{"a prompt seeded on source 0 is pulled from it", src0, src0, dec, 384},
		{"a prompt seeded on source 1 is pulled from it", src1, src1, dec, 384},
		{"a source that never saw the prompt gives nothing", src0, src1, dec, 0},
		{"a prompt seeded nowhere gives nothing", nil, src0, dec, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := words(strings.ReplaceAll(tt.name, " ", "_"), 400)
			if tt.seedOn != nil {
				seed(t, c, tt.seedOn, p)
			}
			// The first pull to a source also opens the session (wait mode
			// waits for the handshake, so it can already hit).
			r := pull(c, tt.dec, tt.pullFrom, p)
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("pull: status %d err %v body %s", r.status, r.err, r.body)
			}
			if r.prompt != 400 || r.cached != tt.wantCached {
				t.Errorf("prompt_tokens %d cached_tokens %d, want 400 and %d", r.prompt, r.cached, tt.wantCached)
			}
			if r.serviceTime <= 0 || r.serviceTime > r.latency {
				t.Errorf("%s %v not in (0, client latency %v]", serviceTimeHeader, r.serviceTime, r.latency)
			}
		})
	}

	t.Run("the decoder's metrics count the pulls", func(t *testing.T) {
		wants := []string{
			`vllm:external_prefix_cache_hits_total{model_name="m",engine="0"} 768`,
			`vllm:kv_offload_tiering_read_bytes_total{model_name="m",tier="1:p2p"} 25165824`, // 2 pulls × 3 blocks × 4 MiB
			`vllm:request_success_total{model_name="m",engine="0",finished_reason="length"} 4`,
			`vllm:prompt_tokens_total{model_name="m",engine="0"} 1600`,
			// Every request has ended: the scheduler's gauges are back at 0.
			`vllm:num_requests_running{model_name="m",engine="0"} 0`,
			`vllm:num_requests_waiting{model_name="m",engine="0"} 0`,
		}
		// The core sends its queue gauges after the step that answered the
		// last pull, so they can reach the front end just after the answer
		// reached this client: the metrics are asked until they say so.
		var m, missing string
		for deadline := time.Now().Add(5 * time.Second); ; {
			m, missing = get(t, c, dec.url+"/metrics"), ""
			for _, want := range wants {
				if !strings.Contains(m, want) {
					missing = want
					break
				}
			}
			if missing == "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if missing != "" {
			t.Errorf("metrics lack %q after 5 s:\n%s", missing, m)
		}
	})
	t.Run("models lists the served model", func(t *testing.T) {
		if m := get(t, c, dec.url+"/v1/models"); !strings.Contains(m, `"id":"m"`) {
			t.Errorf("models: %s", m)
		}
	})
	t.Run("peers log their sessions", func(t *testing.T) {
		for _, want := range []string{"peer " + src0.p2pID() + " connected", "peer " + src1.p2pID() + " connected"} {
			if !strings.Contains(dec.log.String(), want) {
				t.Errorf("decoder log lacks %q", want)
			}
		}
	})

	t.Run("a decoder with another hash seed is refused and prefills", func(t *testing.T) {
		other := startEngine(t, "decoder-seed-7", engineOpts{env: []string{"PYTHONHASHSEED=7"}})
		p := words("seed-mismatch", 400)
		seed(t, c, src0, p)
		r := pull(c, other, src0, p)
		if r.status != http.StatusOK || r.cached != 0 {
			t.Errorf("status %d cached %d, want 200 and 0", r.status, r.cached)
		}
		waitLog(t, other, "P2PSession "+src0.p2pID()+": rejecting peer connect: hash seed mismatch from "+src0.p2pID()+": remote='42', local='7'", 5*time.Second)
		waitLog(t, other, "peer "+src0.p2pID()+" down: protocol error: hash seed mismatch", 5*time.Second)
		waitLog(t, src0, "hash seed mismatch from "+other.p2pID()+": remote='7', local='42'", 5*time.Second)
	})
}

func get(t testing.TB, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d err %v", url, resp.StatusCode, err)
	}
	return string(b)
}
