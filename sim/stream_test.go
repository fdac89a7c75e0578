package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serve puts an in-process engine behind a real HTTP server, so streams and
// disconnects go over TCP as a client sees them.
func serve(t testing.TB, e *inProcess) string {
	srv := httptest.NewServer(e.handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// sse is a streamed answer: the data of each event, in order.
type sse struct {
	status      int
	contentType string
	events      []string
	firstAt     time.Duration // first event since the request was sent
	body        string
}

func postStream(t testing.TB, c *http.Client, url, body string) sse {
	t.Helper()
	start := time.Now()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := sse{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type")}
	raw, err := io.ReadAll(&firstRead{r: resp.Body, start: start, at: &out.firstAt})
	if err != nil {
		t.Fatal(err)
	}
	out.body = string(raw)
	// Events are "data: X\n\n": check the framing strictly.
	rest := out.body
	for rest != "" {
		ev, tail, ok := strings.Cut(rest, "\n\n")
		if !ok || !strings.HasPrefix(ev, "data: ") || strings.Contains(ev, "\n") {
			t.Fatalf("bad SSE framing at %q in:\n%s", clipStr(rest), out.body)
		}
		out.events = append(out.events, strings.TrimPrefix(ev, "data: "))
		rest = tail
	}
	return out
}

type firstRead struct {
	r     io.Reader
	start time.Time
	at    *time.Duration
	seen  bool
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && !f.seen {
		f.seen, *f.at = true, time.Since(f.start)
	}
	return n, err
}

func clipStr(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int     `json:"index"`
		Text  *string `json:"text"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
		Details          *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func parseChunks(t testing.TB, s sse) []chunk {
	t.Helper()
	if s.status != 200 || !strings.HasPrefix(s.contentType, "text/event-stream") {
		t.Fatalf("status %d content type %q: %s", s.status, s.contentType, s.body)
	}
	if n := len(s.events); n == 0 || s.events[n-1] != "[DONE]" {
		t.Fatalf("stream does not end in [DONE]:\n%s", s.body)
	}
	var out []chunk
	for _, ev := range s.events[:len(s.events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %q is not JSON: %v", ev, err)
		}
		out = append(out, c)
	}
	return out
}

func TestStreamedCompletionIsSSEWithUsageChunk(t *testing.T) {
	e := startInProcess(t)
	url := serve(t, e)
	c := newClient(10 * time.Second)
	prompt := words("stream-cmpl", 200)
	s := postStream(t, c, url+"/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, prompt))
	chunks := parseChunks(t, s)
	if len(chunks) != 6 {
		t.Fatalf("%d chunks, want 5 tokens + usage:\n%s", len(chunks), s.body)
	}
	var text strings.Builder
	for i, ch := range chunks[:5] {
		if ch.Object != "text_completion" || ch.ID != chunks[0].ID || !strings.HasPrefix(ch.ID, "cmpl-") || ch.Model != "m" || ch.Usage != nil {
			t.Errorf("chunk %d: %+v", i, ch)
		}
		if len(ch.Choices) != 1 || ch.Choices[0].Text == nil || ch.Choices[0].Delta != nil {
			t.Fatalf("chunk %d choices: %s", i, s.events[i])
		}
		text.WriteString(*ch.Choices[0].Text)
		fr := ch.Choices[0].FinishReason
		if (i < 4) != (fr == nil) || (i == 4 && *fr != "length") {
			t.Errorf("chunk %d finish_reason %v", i, fr)
		}
	}
	u := chunks[5]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 200 || u.Usage.CompletionTokens != 5 || u.Usage.TotalTokens != 205 ||
		u.Usage.Details == nil || u.Usage.Details.CachedTokens != 0 {
		t.Errorf("usage chunk %s", s.events[5])
	}
	if !strings.Contains(s.events[5], `"choices":[]`) {
		t.Errorf("usage chunk without an empty choices list: %s", s.events[5])
	}
	// The same request answered whole says the same words.
	w := e.post(t, fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":5}`, prompt))
	var whole completionResponse
	if err := json.Unmarshal(w.Body.Bytes(), &whole); err != nil || whole.Choices[0].Text != text.String() {
		t.Errorf("streamed text %q, whole %s", text.String(), w.Body)
	}

	t.Run("without include_usage there is no usage chunk", func(t *testing.T) {
		s := postStream(t, c, url+"/v1/completions", `{"prompt":"a b c","max_tokens":3,"stream":true}`)
		chunks := parseChunks(t, s)
		if len(chunks) != 3 || strings.Contains(s.body, `"usage"`) {
			t.Errorf("%d chunks:\n%s", len(chunks), s.body)
		}
	})
	t.Run("continuous_usage_stats puts usage on every chunk", func(t *testing.T) {
		s := postStream(t, c, url+"/v1/completions", `{"prompt":"a b c","max_tokens":2,"stream":true,"stream_options":{"continuous_usage_stats":true}}`)
		chunks := parseChunks(t, s)
		if len(chunks) != 2 || chunks[1].Usage == nil || chunks[1].Usage.CompletionTokens != 2 || chunks[0].Usage.CompletionTokens != 1 {
			t.Errorf("chunks:\n%s", s.body)
		}
	})
}

func TestStreamedChatIsSSEWithRoleAndUsageChunks(t *testing.T) {
	e := startInProcess(t)
	url := serve(t, e)
	c := newClient(10 * time.Second)
	s := postStream(t, c, url+"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hello"},{"type":"text","text":"there"}]}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`)
	chunks := parseChunks(t, s)
	if len(chunks) != 6 {
		t.Fatalf("%d chunks, want role + 4 tokens + usage:\n%s", len(chunks), s.body)
	}
	for i, ch := range chunks {
		if ch.Object != "chat.completion.chunk" || !strings.HasPrefix(ch.ID, "chatcmpl-") || ch.ID != chunks[0].ID {
			t.Errorf("chunk %d: %s", i, s.events[i])
		}
	}
	role := chunks[0].Choices[0].Delta
	if role == nil || role.Role == nil || *role.Role != "assistant" || role.Content == nil || *role.Content != "" {
		t.Errorf("first chunk is not the role: %s", s.events[0])
	}
	for i := 1; i <= 4; i++ {
		d := chunks[i].Choices[0].Delta
		if d == nil || d.Role != nil || d.Content == nil || !strings.HasPrefix(*d.Content, " ") {
			t.Errorf("chunk %d is not a content delta: %s", i, s.events[i])
		}
		fr := chunks[i].Choices[0].FinishReason
		if (i < 4) != (fr == nil) {
			t.Errorf("chunk %d finish_reason %v", i, fr)
		}
	}
	// <|begin_of_text|>, 2 × (start, role, end, content..., eot), then the
	// generation prompt (start, assistant, end): 1 + (3+2+1) + (3+2+1) + 3.
	if u := chunks[5].Usage; u == nil || len(chunks[5].Choices) != 0 || u.PromptTokens != 16 || u.CompletionTokens != 4 || u.Details == nil {
		t.Errorf("usage chunk: %s", s.events[5])
	}

	t.Run("plain chat answer", func(t *testing.T) {
		resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || r.Object != "chat.completion" || !strings.HasPrefix(r.ID, "chatcmpl-") || len(r.Choices) != 1 ||
			r.Choices[0].Message.Role != "assistant" || len(strings.Fields(r.Choices[0].Message.Content)) != 3 || r.Choices[0].FinishReason != "length" ||
			r.Usage.CompletionTokens != 3 || r.Usage.PromptTokens != 9 {
			t.Errorf("status %d answer %+v", resp.StatusCode, r)
		}
	})
	t.Run("no max_tokens generates up to the context, as vLLM's chat default", func(t *testing.T) {
		s := postStream(t, c, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
		chunks := parseChunks(t, s)
		if u := chunks[len(chunks)-1].Usage; u == nil || u.CompletionTokens != 512-9 {
			t.Errorf("usage %s", s.events[len(s.events)-2])
		}
	})
}

// chatBody is a conversation of about n tokens, as a JSON body.
func chatBody(tag string, n int, extra string) string {
	return fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":"you help"},{"role":"user","content":%q}],"max_tokens":1,"temperature":0%s}`,
		words(tag, n), extra)
}

func kvExtra(src *inProcess, id string) string {
	return fmt.Sprintf(`,"kv_transfer_params":{"remote_kv_source":{"kv_request_id":%q,"remote_host":%q,"remote_port":%d}}`, id, src.host, src.port)
}

func postJSON(t testing.TB, c *http.Client, url, body string) (int, completionResponse, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r completionResponse
	_ = json.Unmarshal(raw, &r)
	return resp.StatusCode, r, string(raw)
}

func cachedOf(r completionResponse) int {
	if r.Usage.PromptTokensDetails == nil {
		return -1
	}
	return r.Usage.PromptTokensDetails.CachedTokens
}

func TestChatPullHitsAfterChatSeedAndCacheSaltPreventsIt(t *testing.T) {
	src, dec := startInProcess(t), startInProcess(t)
	srcURL, decURL := serve(t, src), serve(t, dec)
	c := newClient(20 * time.Second)
	// Warm the decoder's session with the source.
	warmP := completionBody(words("chat-warm", 400))
	if st, _, b := postJSON(t, c, srcURL+"/v1/completions", warmP); st != 200 {
		t.Fatal(b)
	}
	if st, r, b := postJSON(t, c, decURL+"/v1/completions", pullBody(words("chat-warm", 400), src, 0)); st != 200 || cachedOf(r) != 384 {
		t.Fatalf("warm-up pull: %s", b)
	}

	// <|begin_of_text|>, the system turn (6), the user turn (390 words + 4),
	// the generation prompt (3): 404 tokens, 3 full blocks.
	seedBody := chatBody("chat-a", 390, "")
	if st, _, b := postJSON(t, c, srcURL+"/v1/chat/completions", seedBody); st != 200 {
		t.Fatal(b)
	}
	st, r, b := postJSON(t, c, decURL+"/v1/chat/completions", chatBody("chat-a", 390, kvExtra(src, "chat-1")))
	if st != 200 || cachedOf(r) != 384 || r.Usage.PromptTokens != 1+6+394+3 {
		t.Fatalf("chat pull after a chat seed: %s", b)
	}

	t.Run("a streamed chat pull hits", func(t *testing.T) {
		if st, _, b := postJSON(t, c, srcURL+"/v1/chat/completions", chatBody("chat-s", 390, "")); st != 200 {
			t.Fatal(b)
		}
		s := postStream(t, c, decURL+"/v1/chat/completions", chatBody("chat-s", 390, kvExtra(src, "chat-2")+`,"stream":true,"stream_options":{"include_usage":true}`))
		chunks := parseChunks(t, s)
		if u := chunks[len(chunks)-1].Usage; u == nil || u.Details == nil || u.Details.CachedTokens != 384 {
			t.Errorf("streamed chat pull:\n%s", s.body)
		}
	})
	t.Run("the rendered conversation as a completion prompt hits the chat seed", func(t *testing.T) {
		if st, _, b := postJSON(t, c, srcURL+"/v1/chat/completions", chatBody("chat-r", 390, "")); st != 200 {
			t.Fatal(b)
		}
		text := renderChat([]chatMessage{{"system", "you help"}, {"user", words("chat-r", 390)}}, true)
		st, r, b := postJSON(t, c, decURL+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":1%s}`, text, kvExtra(src, "chat-3")))
		if st != 200 || cachedOf(r) != 384 {
			t.Errorf("completion of the rendered chat: %s", b)
		}
	})
	t.Run("cache_salt: a pull with another salt misses, with the seed's salt hits", func(t *testing.T) {
		if st, _, b := postJSON(t, c, srcURL+"/v1/chat/completions", chatBody("chat-salt", 390, `,"cache_salt":"trial-1"`)); st != 200 {
			t.Fatal(b)
		}
		st, r, b := postJSON(t, c, decURL+"/v1/chat/completions", chatBody("chat-salt", 390, `,"cache_salt":"trial-2"`+kvExtra(src, "chat-4")))
		if st != 200 || cachedOf(r) != 0 {
			t.Errorf("pull with another salt: %s", b)
		}
		st, r, b = postJSON(t, c, decURL+"/v1/chat/completions", chatBody("chat-salt", 390, `,"cache_salt":"trial-1"`+kvExtra(src, "chat-5")))
		if st != 200 || cachedOf(r) != 384 {
			t.Errorf("pull with the seed's salt: %s", b)
		}
		// Completions too: salted seed, unsalted pull.
		p := words("cmpl-salt", 400)
		if st, _, b := postJSON(t, c, srcURL+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":1,"cache_salt":"x"}`, p)); st != 200 {
			t.Fatal(b)
		}
		if st, r, b := postJSON(t, c, decURL+"/v1/completions", pullBody(p, src, 6)); st != 200 || cachedOf(r) != 0 {
			t.Errorf("unsalted pull of a salted seed: %s", b)
		}
	})
	t.Run("another conversation misses", func(t *testing.T) {
		st, r, b := postJSON(t, c, decURL+"/v1/chat/completions", chatBody("chat-never-seeded", 390, kvExtra(src, "chat-7")))
		if st != 200 || cachedOf(r) != 0 {
			t.Errorf("pull of an unseeded chat: %s", b)
		}
	})
}

func TestTokenizeCountIsPromptTokens(t *testing.T) {
	e := startInProcess(t)
	url := serve(t, e)
	c := newClient(10 * time.Second)
	tok := func(body string) (int, []int32) {
		t.Helper()
		resp, err := c.Post(url+"/tokenize", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Count       int     `json:"count"`
			MaxModelLen int     `json:"max_model_len"`
			Tokens      []int32 `json:"tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || r.MaxModelLen != 512 || r.Count != len(r.Tokens) {
			t.Fatalf("tokenize %s: status %d %+v %v", body, resp.StatusCode, r, err)
		}
		return r.Count, r.Tokens
	}
	prompt := "the quick <|eot_id|>brown fox " + words("tok", 20)
	n, toks := tok(fmt.Sprintf(`{"model":"m","prompt":%q}`, prompt))
	_, r, b := postJSON(t, c, url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":1}`, prompt))
	if n != 25 || r.Usage.PromptTokens != n {
		t.Errorf("tokenize count %d, completion prompt_tokens %d (%s)", n, r.Usage.PromptTokens, b)
	}
	if toks[2] != 128009 {
		t.Errorf("<|eot_id|> is token %d, want Llama 3's 128009", toks[2])
	}

	msgs := `"messages":[{"role":"user","content":"hi there"},{"role":"assistant","content":"hello"},{"role":"user","content":"how are you"}]`
	n, _ = tok(`{` + msgs + `}`)
	_, r, b = postJSON(t, c, url+"/v1/chat/completions", `{`+msgs+`,"max_tokens":1}`)
	if n != 1+6+5+7+3 || r.Usage.PromptTokens != n {
		t.Errorf("chat tokenize count %d, chat prompt_tokens %d (%s)", n, r.Usage.PromptTokens, b)
	}
	n2, _ := tok(`{` + msgs + `,"add_generation_prompt":false}`)
	if n2 != n-3 {
		t.Errorf("without the generation prompt %d tokens, want %d", n2, n-3)
	}

	t.Run("detokenize then tokenize gives the ids back", func(t *testing.T) {
		ids := append([]int32{128000, 5, 131071}, toks...)
		b, _ := json.Marshal(map[string]any{"tokens": ids})
		resp, err := c.Post(url+"/detokenize", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d struct {
			Prompt string `json:"prompt"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != 200 {
			t.Fatal(err, resp.StatusCode)
		}
		if !strings.HasPrefix(d.Prompt, "<|begin_of_text|><|tok_5|><|tok_131071|>the quick<|eot_id|>brown fox tok-0 tok-1") {
			t.Errorf("detokenized %q", d.Prompt)
		}
		pb, _ := json.Marshal(map[string]any{"prompt": d.Prompt})
		_, back := tok(string(pb))
		if fmt.Sprint(back) != fmt.Sprint(ids) {
			t.Errorf("round trip %v, want %v", back, ids)
		}
	})
	t.Run("version and ping", func(t *testing.T) {
		resp, err := c.Get(url + "/version")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(raw) != `{"version":"`+simVersion+`"}`+"\n" {
			t.Errorf("version: %d %s", resp.StatusCode, raw)
		}
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(m, url+"/ping", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s /ping: %d", m, resp.StatusCode)
			}
		}
	})
}

var abortLine = regexp.MustCompile(`vllm:request_success_total\{model_name="m",engine="0",finished_reason="abort"\} (\d+)`)

func metricValue(t testing.TB, c *http.Client, url string, re *regexp.Regexp) int {
	t.Helper()
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := re.FindSubmatch(raw)
	if m == nil {
		t.Fatalf("metrics lack %s:\n%s", re, raw)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func TestStreamDisconnectAbortsTheEngineRequest(t *testing.T) {
	e := startInProcess(t)
	url := serve(t, e)
	c := newClient(10 * time.Second)
	gen := regexp.MustCompile(`vllm:generation_tokens_total\{model_name="m",engine="0"\} (\d+)`)
	length := regexp.MustCompile(`vllm:request_success_total\{model_name="m",engine="0",finished_reason="length"\} (\d+)`)
	// 400 tokens at 2 ms each: the stream would run 0.8 s.
	resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a b c","max_tokens":400,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	resp.Body.Close() // the client goes away after its first token
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, c, url, abortLine) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the engine never reported the request aborted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g := metricValue(t, c, url, gen); g < 1 || g >= 400 {
		t.Errorf("generation tokens %d: want the few sampled before the abort", g)
	}
	if n := metricValue(t, c, url, length); n != 0 {
		t.Errorf("%d requests finished with length: the aborted one must not", n)
	}
	// The engine is free: a new request completes at once.
	if st, _, b := postJSON(t, c, url+"/v1/completions", `{"prompt":"a b","max_tokens":1}`); st != 200 {
		t.Errorf("after the abort: %s", b)
	}

	t.Run("a non-streamed request whose client goes away is aborted too", func(t *testing.T) {
		short := &http.Client{Timeout: 100 * time.Millisecond}
		if _, err := short.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x y","max_tokens":400}`)); err == nil {
			t.Fatal("a 0.8 s request answered within 0.1 s")
		}
		deadline := time.Now().Add(5 * time.Second)
		for metricValue(t, c, url, abortLine) != 2 {
			if time.Now().After(deadline) {
				t.Fatal("the engine never reported the second request aborted")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
