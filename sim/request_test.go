package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBadRequestsAreAnswered400(t *testing.T) {
	e := startEngine(t, "engine", engineOpts{})
	c := newClient(10 * time.Second)
	long := strings.Repeat("w ", 600)
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantParam  any
		wantMsg    string
	}{
		{"malformed JSON", `{"prompt": "a b"`, 400, nil, "not a JSON object"},
		{"not an object", `["a"]`, 400, nil, "not a JSON object"},
		{"trailing data", `{"prompt":"a"} {}`, 400, nil, "trailing data"},
		{"no prompt", `{"model":"m"}`, 400, "prompt", "prompt is required"},
		{"null prompt", `{"prompt":null}`, 400, "prompt", "prompt is required"},
		{"empty prompt", `{"prompt":"   "}`, 400, "prompt", "prompt is empty"},
		{"empty token list", `{"prompt":[]}`, 400, "prompt", "prompt is empty"},
		{"prompt of another type", `{"prompt":7}`, 400, "prompt", "string or an array of token ids"},
		{"negative token id", `{"prompt":[1,-2]}`, 400, "prompt", "token id -2 at index 1 is out of range"},
		{"token id over the vocabulary", `{"prompt":[131072]}`, 400, "prompt", "token id 131072 at index 0 is out of range [0, 131072)"},
		{"fractional token id", `{"prompt":[1.5]}`, 400, "prompt", "index 0 is not an integer"},
		{"batched prompts", `{"prompt":["a","b"]}`, 400, "prompt", "batched prompts"},
		{"prompt over max-model-len", `{"prompt":"` + long + `","max_tokens":1}`, 400, "prompt", "maximum context length is 512 tokens. However, you requested 601 tokens (600 in the prompt, 1 for the completion)"},
		{"prompt plus max_tokens over max-model-len", `{"prompt":"a b c","max_tokens":510}`, 400, "prompt", "you requested 513 tokens"},
		{"zero max_tokens", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", "max_tokens must be at least 1, got 0"},
		{"string max_tokens", `{"prompt":"a","max_tokens":"5"}`, 400, "max_tokens", "max_tokens must be an integer"},
		{"negative temperature", `{"prompt":"a","temperature":-1}`, 400, "temperature", "temperature must be non-negative"},
		{"stream not a boolean", `{"prompt":"a","stream":"yes"}`, 400, "stream", "stream must be a boolean"},
		{"stream_options without stream", `{"prompt":"a","stream_options":{"include_usage":true}}`, 400, "stream_options", "Stream options can only be defined when `stream=True`."},
		{"stream_options with stream false", `{"prompt":"a","stream":false,"stream_options":{"include_usage":true}}`, 400, "stream_options", "only be defined when `stream=True`"},
		{"stream_options not an object", `{"prompt":"a","stream":true,"stream_options":[1]}`, 400, "stream_options", "stream_options must be an object"},
		{"include_usage not a boolean", `{"prompt":"a","stream":true,"stream_options":{"include_usage":1}}`, 400, "stream_options", "stream_options.include_usage must be a boolean"},
		{"n over 1", `{"prompt":"a","n":2}`, 400, "n", "n must be 1"},
		{"empty cache_salt", `{"prompt":"a","cache_salt":""}`, 400, "cache_salt", "cache_salt must be a non-empty string"},
		{"kv_transfer_params not an object", `{"prompt":"a","kv_transfer_params":"x"}`, 400, "kv_transfer_params", "kv_transfer_params must be an object"},
		{"unknown key under kv_transfer_params", `{"prompt":"a","kv_transfer_params":{"p2p":{}}}`, 400, "kv_transfer_params", `unknown key "p2p"`},
		{"remote_kv_source not an object", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":[]}}`, 400, "kv_transfer_params", "remote_kv_source must be an object"},
		{"remote_kv_source without kv_request_id", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"remote_host":"127.0.0.1","remote_port":7777}}}`, 400, "kv_transfer_params", "remote_kv_source.kv_request_id is required"},
		{"remote_kv_source without remote_host", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"kv_request_id":"x","remote_port":7777}}}`, 400, "kv_transfer_params", "remote_kv_source.remote_host is required"},
		{"remote_kv_source without remote_port", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"kv_request_id":"x","remote_host":"127.0.0.1"}}}`, 400, "kv_transfer_params", "remote_kv_source.remote_port is required"},
		{"remote_port out of range", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"kv_request_id":"x","remote_host":"127.0.0.1","remote_port":70000}}}`, 400, "kv_transfer_params", "remote_port must be an integer in 1..65535, got 70000"},
		{"remote_port as a string", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"kv_request_id":"x","remote_host":"127.0.0.1","remote_port":"7777"}}}`, 400, "kv_transfer_params", "remote_port must be an integer"},
		{"unknown key under remote_kv_source", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"kv_request_id":"x","remote_host":"h","remote_port":1,"tier":2}}}`, 400, "kv_transfer_params", `remote_kv_source: unknown key "tier"`},
		{"another model", `{"model":"other","prompt":"a"}`, 404, "model", "The model `other` does not exist."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAPIError(t, c, e.url+"/v1/completions", tt.body, tt.wantStatus, tt.wantParam, tt.wantMsg)
		})
	}

	t.Run("a body over the size limit", func(t *testing.T) {
		big := `{"prompt":"` + strings.Repeat("x", maxBodyBytes) + `"}`
		resp, err := c.Post(e.url+"/v1/completions", "application/json", strings.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(raw), fmt.Sprintf("larger than %d bytes", maxBodyBytes)) {
			t.Errorf("status %d body %s", resp.StatusCode, raw)
		}
	})
	t.Run("a GET on completions", func(t *testing.T) {
		resp, err := c.Get(e.url + "/v1/completions")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("status %d Allow %q, want 405 POST", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
	t.Run("the engine still serves after bad requests", func(t *testing.T) {
		r := postCompletion(c, e.url, map[string]any{"model": "m", "prompt": []int{1, 2, 3}, "max_tokens": 2})
		if r.status != 200 || r.prompt != 3 {
			t.Errorf("status %d prompt_tokens %d body %s", r.status, r.prompt, r.body)
		}
	})
}

func TestDecodeCompletionRequest(t *testing.T) {
	tests := []struct {
		name string
		body string
		want func(completionRequest) string
	}{
		{"a string prompt is one token per word; max_tokens defaults to 16", `{"prompt":"a b  c"}`, func(r completionRequest) string {
			if len(r.Tokens) != 3 || r.MaxTokens != defaultMaxTokens || r.Source != nil {
				return fmt.Sprintf("%+v", r)
			}
			return ""
		}},
		{"token ids are kept as given", `{"prompt":[0,5,131071],"max_tokens":4,"temperature":0.5}`, func(r completionRequest) string {
			if fmt.Sprint(r.Tokens) != "[0 5 131071]" || r.MaxTokens != 4 || r.Temperature != 0.5 {
				return fmt.Sprintf("%+v", r)
			}
			return ""
		}},
		{"remote_kv_source names the peer literally", `{"prompt":"a","kv_transfer_params":{"remote_kv_source":{"kv_request_id":"k","remote_host":"localhost","remote_port":7777}}}`, func(r completionRequest) string {
			if r.Source == nil || r.Source.ID() != "localhost:7777" || r.Source.KVRequestID != "k" {
				return fmt.Sprintf("%+v", r.Source)
			}
			return ""
		}},
		{"null kv_transfer_params and model are ignored; unknown top-level keys too", `{"model":null,"prompt":"a","kv_transfer_params":null,"top_p":1,"n":1}`, func(r completionRequest) string {
			if r.Source != nil {
				return "source set"
			}
			return ""
		}},
		{"remote_decoder alone is accepted (PD producer leg)", `{"prompt":"a","cache_salt":"s","kv_transfer_params":{"remote_decoder":{"kv_request_id":"k"}}}`, func(r completionRequest) string {
			if r.Source != nil || r.CacheSalt != "s" {
				return fmt.Sprintf("%+v", r)
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, apiErr := decodeCompletionRequest([]byte(tt.body), "m", 512)
			if apiErr != nil {
				t.Fatalf("unexpected error: %v", apiErr)
			}
			if msg := tt.want(r); msg != "" {
				t.Errorf("decoded %s", msg)
			}
		})
	}
}

// FuzzDecodeCompletionRequest: any body gets a request or an API error with
// a message, never a panic.
func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"a b c","max_tokens":1,"temperature":0}`,
		`{"prompt":[1,2,3],"kv_transfer_params":{"remote_kv_source":{"kv_request_id":"k","remote_host":"127.0.0.1","remote_port":7777}}}`,
		`{"prompt":"x","kv_transfer_params":{"remote_decoder":{"kv_request_id":"k"}},"cache_salt":"s","stream":false}`,
		`{"prompt":[[1]]}`, `{"prompt":1e400}`, `[]`, `null`, ``, `{"prompt":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, apiErr := decodeCompletionRequest(body, "m", 512)
		if apiErr != nil {
			if apiErr.Message == "" || apiErr.Status < 400 {
				t.Fatalf("error without message or status: %+v", apiErr)
			}
			return
		}
		if len(r.Tokens) == 0 || r.MaxTokens < 1 || len(r.Tokens)+r.MaxTokens > 512 {
			t.Fatalf("accepted an invalid request: %d tokens, max_tokens %d", len(r.Tokens), r.MaxTokens)
		}
		if r.Source != nil && (r.Source.Port < 1 || r.Source.Port > 65535 || r.Source.Host == "" || r.Source.KVRequestID == "") {
			t.Fatalf("accepted an invalid remote_kv_source %+v", r.Source)
		}
		var buf bytes.Buffer
		_ = json.NewEncoder(&buf).Encode(r.Tokens)
	})
}
