package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"p2pfault/exitcode"
	"p2pfault/sim/engine"
)

// completionText is choices[0].text of a plain completion.
func completionText(t *testing.T, r result) string {
	t.Helper()
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("completion: status %d err %v body %s", r.status, r.err, r.body)
	}
	var resp completionResponse
	if err := json.Unmarshal([]byte(r.body), &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("completion body: %v: %s", err, r.body)
	}
	return resp.Choices[0].Text
}

// TestTheTextIsAFunctionOfTheKVDecoded: a pull decodes from blocks another
// engine computed and gives the text that engine gives for the prompt; a
// local prefill on a third gives it too, also with every defect on (none of
// their triggers happens here). Sampling (temperature > 0) follows the
// request's seed.
func TestTheTextIsAFunctionOfTheKVDecoded(t *testing.T) {
	defects := []string{"--sim-defect", "reuse-freed-blocks", "--sim-defect", "recompute-keeps-partial"}
	for _, tt := range []struct {
		name string
		args []string
	}{{"no-defect", nil}, {"both-defects-on", defects}} {
		t.Run(tt.name, func(t *testing.T) {
			src := startEngine(t, "source", engineOpts{args: tt.args})
			dec := startEngine(t, "decoder", engineOpts{args: tt.args})
			alone := startEngine(t, "alone", engineOpts{noP2P: true, args: tt.args})
			c := newClient(20 * time.Second)
			warm(t, c, dec, src)
			body := func(p string, extra map[string]any) map[string]any {
				b := map[string]any{"model": "m", "prompt": p, "max_tokens": 8, "temperature": 0}
				for k, v := range extra {
					b[k] = v
				}
				return b
			}
			for i := 0; i < 5; i++ {
				p := words(fmt.Sprintf("text-%s-%d", tt.name, i), 400)
				own := completionText(t, postCompletion(c, src.url, body(p, nil)))
				pr := postCompletion(c, dec.url, body(p, map[string]any{"kv_transfer_params": map[string]any{"remote_kv_source": map[string]any{
					"kv_request_id": fmt.Sprint("t", i), "remote_host": src.p2pHost, "remote_port": src.p2pPort}}}))
				if pr.cached != 384 {
					t.Fatalf("pull %d cached %d, want 384", i, pr.cached)
				}
				if got := completionText(t, pr); got != own {
					t.Errorf("pull %d gave %q, the source gave %q", i, got, own)
				}
				if got := completionText(t, postCompletion(c, alone.url, body(p, nil))); got != own {
					t.Errorf("local prefill %d gave %q, the source gave %q", i, got, own)
				}
			}
			p := words("sampled-"+tt.name, 100)
			hot := map[string]any{"temperature": 0.8, "seed": 7}
			a := completionText(t, postCompletion(c, src.url, body(p, hot)))
			if b := completionText(t, postCompletion(c, alone.url, body(p, hot))); a != b {
				t.Errorf("temperature 0.8 with seed 7 gave %q and %q for the same prompt", a, b)
			}
			greedy := completionText(t, postCompletion(c, src.url, body(p, nil)))
			unseeded := map[string]any{"temperature": 0.8}
			x := completionText(t, postCompletion(c, src.url, body(p, unseeded)))
			y := completionText(t, postCompletion(c, src.url, body(p, unseeded)))
			if x == y && x == greedy {
				t.Errorf("temperature 0.8 without a seed gave the greedy text %q twice", x)
			}
		})
	}
}

func TestSimDefectFlag(t *testing.T) {
	env := map[string]string{"PYTHONHASHSEED": "42"}
	c, err := resolveArgs(t, env)
	if err != nil || c.Engine.Defects != (engine.Defects{}) {
		t.Fatalf("default: err %v defects %+v, want none", err, c.Engine.Defects)
	}
	c, err = resolveArgs(t, env, "--sim-defect", "reuse-freed-blocks", "--sim-defect=recompute-keeps-partial")
	if err != nil || !c.Engine.Defects.ReuseFreedBlocks || !c.Engine.Defects.RecomputeKeepsPartial {
		t.Fatalf("both: err %v defects %+v", err, c.Engine.Defects)
	}
	c, err = resolveArgs(t, env, "--sim-defect", "recompute-keeps-partial")
	if err != nil || c.Engine.Defects.ReuseFreedBlocks || !c.Engine.Defects.RecomputeKeepsPartial {
		t.Fatalf("one: err %v defects %+v", err, c.Engine.Defects)
	}
	_, err = resolveArgs(t, env, "--sim-defect", "reuse-freed-block")
	var ee *exitcode.Error
	if !errors.As(err, &ee) || ee.Code != exitcode.Usage || !strings.Contains(err.Error(), `--sim-defect "reuse-freed-block": want one of reuse-freed-blocks, recompute-keeps-partial`) {
		t.Errorf("a misspelt defect: %v, want a usage error naming it", err)
	}
}

func TestRequestSeed(t *testing.T) {
	r, apiErr := decodeCompletionRequest([]byte(`{"prompt":"a","temperature":0.7,"seed":-3}`), "m", 512)
	if apiErr != nil || r.Seed == nil || *r.Seed != -3 {
		t.Fatalf("seed -3: %+v %v", r.Seed, apiErr)
	}
	if r, _ := decodeCompletionRequest([]byte(`{"prompt":"a","seed":null}`), "m", 512); r.Seed != nil {
		t.Errorf("a null seed is no seed, got %d", *r.Seed)
	}
	for _, bad := range []string{`"7"`, `1.5`, `true`} {
		_, apiErr := decodeCompletionRequest([]byte(`{"prompt":"a","seed":`+bad+`}`), "m", 512)
		if apiErr == nil || apiErr.Param != "seed" || !strings.Contains(apiErr.Message, "seed must be an integer") {
			t.Errorf("seed %s: %+v, want a 400 on seed", bad, apiErr)
		}
	}
	// Greedy ignores the seed; sampling with one seed repeats.
	kv := uint64(0x1234)
	greedy := completionRequest{}
	seven := int64(7)
	hot := completionRequest{Temperature: 0.7, Seed: &seven}
	if sampleSeed(greedy, kv) != kv || sampleSeed(hot, kv) != sampleSeed(hot, kv) || sampleSeed(hot, kv) == kv {
		t.Errorf("sampleSeed: greedy %x, seeded %x then %x (kv %x)", sampleSeed(greedy, kv), sampleSeed(hot, kv), sampleSeed(hot, kv), kv)
	}
}
