package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// checkAPIError posts body to url and checks vLLM's error answer:
// {"error":{"message","type","param","code"}}.
func checkAPIError(t *testing.T, c *http.Client, url, body string, wantStatus int, wantParam any, wantMsg string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &eb); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, raw)
	}
	if resp.StatusCode != wantStatus || eb.Error.Code != wantStatus {
		t.Errorf("status %d code %d, want %d", resp.StatusCode, eb.Error.Code, wantStatus)
	}
	if !strings.Contains(eb.Error.Message, wantMsg) {
		t.Errorf("message %q lacks %q", eb.Error.Message, wantMsg)
	}
	if eb.Error.Param != wantParam {
		t.Errorf("param %v, want %v", eb.Error.Param, wantParam)
	}
	wantType := map[int]string{400: "BadRequestError", 404: "NotFoundError"}[wantStatus]
	if eb.Error.Type != wantType {
		t.Errorf("type %q, want %q", eb.Error.Type, wantType)
	}
}

func TestBadChatAndTokenizerRequestsAreAnswered400(t *testing.T) {
	e := startEngine(t, "engine", engineOpts{})
	c := newClient(10 * time.Second)
	long := strings.Repeat("w ", 600)
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantParam        any
		wantMsg          string
	}{
		{"no messages", "/v1/chat/completions", `{"model":"m"}`, 400, "messages", "messages is required"},
		{"messages not a list", "/v1/chat/completions", `{"messages":{"role":"user"}}`, 400, "messages", "messages must be a list of message objects"},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "messages must not be empty"},
		{"a message not an object", "/v1/chat/completions", `{"messages":["hi"]}`, 400, "messages", "messages[0] must be an object"},
		{"a message without role", "/v1/chat/completions", `{"messages":[{"content":"hi"}]}`, 400, "messages", "messages[0].role is required"},
		{"a role not a string", "/v1/chat/completions", `{"messages":[{"role":1,"content":"hi"}]}`, 400, "messages", "messages[0].role must be a string"},
		{"an unknown role", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"hi"}]}`, 400, "messages", `messages[1].role "robot" is not supported`},
		{"content a number", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages", "messages[0].content must be a string or a list of text parts"},
		{"a part not an object", "/v1/chat/completions", `{"messages":[{"role":"user","content":["hi"]}]}`, 400, "messages", "messages[0].content[0] must be an object"},
		{"a part without type", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, 400, "messages", "messages[0].content[0].type is required"},
		{"an image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages", `type "image_url" is not supported`},
		{"a text part without text", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, 400, "messages", "messages[0].content[0].text must be a string"},
		{"stream not a boolean", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":1}`, 400, "stream", "stream must be a boolean"},
		{"stream_options without stream", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "stream_options", "Stream options can only be defined when `stream=True`."},
		{"zero max_completion_tokens", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":0}`, 400, "max_completion_tokens", "max_completion_tokens must be at least 1"},
		{"conversation over max-model-len", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "messages", "maximum context length is 512 tokens"},
		{"add_generation_prompt not a boolean", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":"yes"}`, 400, "add_generation_prompt", "must be a boolean"},
		{"chat for another model", "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404, "model", "The model `x` does not exist."},
		{"tokenize without prompt", "/tokenize", `{}`, 400, "prompt", "prompt (a string) or messages is required"},
		{"tokenize with prompt and messages", "/tokenize", `{"prompt":"a","messages":[{"role":"user","content":"a"}]}`, 400, nil, "not both"},
		{"tokenize an unknown role", "/tokenize", `{"messages":[{"role":"x","content":"a"}]}`, 400, "messages", `role "x" is not supported`},
		{"detokenize without tokens", "/detokenize", `{"prompt":"a"}`, 400, "tokens", "tokens (an array of token ids) is required"},
		{"detokenize an id out of range", "/detokenize", `{"tokens":[1,131072]}`, 400, "tokens", "token id 131072 at index 1 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAPIError(t, c, e.url+tt.path, tt.body, tt.wantStatus, tt.wantParam, tt.wantMsg)
		})
	}
}

// FuzzDecodeChatRequest: any body gets a request or an API error with a
// message, never a panic; an accepted request fits the context and its
// tokens are what the chat template renders.
func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":"<|eot_id|><|tok_7|>"}],"cache_salt":"s","add_generation_prompt":false,"max_completion_tokens":3}`,
		`{"messages":[]}`, `{"messages":[{"role":"robot"}]}`, `{"messages":"x"}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, apiErr := decodeChatRequest(body, "m", 512)
		if apiErr != nil {
			if apiErr.Message == "" || apiErr.Status < 400 {
				t.Fatalf("error without message or status: %+v", apiErr)
			}
			return
		}
		if !r.Chat || len(r.Tokens) == 0 || r.MaxTokens < 1 || len(r.Tokens)+r.MaxTokens > 512 {
			t.Fatalf("accepted an invalid request: chat %v, %d tokens, max_tokens %d", r.Chat, len(r.Tokens), r.MaxTokens)
		}
		if r.Tokens[0] != 128000 {
			t.Fatalf("prompt does not start with <|begin_of_text|>: %v", r.Tokens[:1])
		}
		if (r.IncludeUsage || r.ContinuousUsage) && !r.Stream {
			t.Fatal("stream options accepted without stream")
		}
	})
}
