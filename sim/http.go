package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"p2pfault/sim/link"
)

// maxBodyBytes bounds a completions body: a 131072-token prompt as ids is
// under 1 MiB.
const maxBodyBytes = 1 << 20

// serviceTimeHeader reports the front end's time from request received to
// response written, so a client can subtract it from what it measured.
const serviceTimeHeader = "X-Sim-Service-Time"

func (f *frontEnd) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", f.handleHealth)
	mux.HandleFunc("/v1/models", f.handleModels)
	mux.HandleFunc("/v1/completions", f.handleCompletions)
	mux.HandleFunc("/v1/chat/completions", f.handleChatCompletions)
	mux.HandleFunc("/tokenize", f.handleTokenize)
	mux.HandleFunc("/detokenize", f.handleDetokenize)
	mux.HandleFunc("/version", f.handleVersion)
	mux.HandleFunc("/ping", f.handlePing)
	mux.HandleFunc("/metrics", f.handleMetrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	writeAPIError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "MethodNotAllowedError",
		Message: fmt.Sprintf("%s %s: method not allowed (want %s)", r.Method, r.URL.Path, method)})
	return false
}

// handleHealth answers 200 as long as the front end runs: like vLLM's API
// server, it does not notice a stopped engine core.
func (f *frontEnd) handleHealth(w http.ResponseWriter, r *http.Request) {
	if allow(w, r, http.MethodGet) {
		w.WriteHeader(http.StatusOK)
	}
}

func (f *frontEnd) handleModels(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": f.cfg.Model, "object": "model", "created": time.Now().Unix(), "owned_by": "vllm",
			"root": f.cfg.Model, "parent": nil, "max_model_len": f.cfg.MaxModelLen,
		}},
	})
}

func (f *frontEnd) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	var buf bytes.Buffer
	if err := f.writeMetrics(&buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

type completionResponse struct {
	ID               string   `json:"id"`
	Object           string   `json:"object"`
	Created          int64    `json:"created"`
	Model            string   `json:"model"`
	Choices          []choice `json:"choices"`
	Usage            usage    `json:"usage"`
	KVTransferParams any      `json:"kv_transfer_params"`
}

type choice struct {
	Index        int    `json:"index"`
	Text         string `json:"text"`
	Logprobs     any    `json:"logprobs"`
	FinishReason string `json:"finish_reason"`
	StopReason   any    `json:"stop_reason"`
}

type usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func (f *frontEnd) handleCompletions(w http.ResponseWriter, r *http.Request) {
	f.serveGenerate(w, r, decodeCompletionRequest)
}

func (f *frontEnd) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	f.serveGenerate(w, r, decodeChatRequest)
}

// postBody is the prologue of a POST handler: the method checked and the
// body read; false when it has answered already (405, or the body's 400).
func postBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if !allow(w, r, http.MethodPost) {
		return nil, false
	}
	body, apiErr := readBody(w, r)
	if apiErr != nil {
		writeAPIError(w, apiErr)
		return nil, false
	}
	return body, true
}

// readBody reads a request body of at most maxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, badRequest("", "request body is larger than %d bytes", maxBodyBytes)
		}
		return nil, badRequest("", "read request body: %v", err)
	}
	return body, nil
}

// serveGenerate runs a completion or chat completion: validated by decode,
// run on the core, answered whole or streamed (stream.go).
func (f *frontEnd) serveGenerate(w http.ResponseWriter, r *http.Request, decode func([]byte, string, int) (completionRequest, *apiError)) {
	received := time.Now()
	body, ok := postBody(w, r)
	if !ok {
		return
	}
	req, apiErr := decode(body, f.cfg.Model, f.cfg.MaxModelLen)
	if apiErr == nil {
		req.DPRank, apiErr = dataParallelRank(r.Header, len(f.cores))
	}
	if apiErr != nil {
		writeAPIError(w, apiErr)
		return
	}
	if req.Stream {
		f.stream(w, r, req, received)
		return
	}
	res, core, err := f.complete(r.Context(), req)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return // the client is gone
		}
		writeAPIError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: err.Error()})
		return
	}
	if apiErr := core.resultError(res, req); apiErr != nil {
		writeAPIError(w, apiErr)
		return
	}
	core.metrics.record(res.Stats, req.MaxTokens, true, req.Source != nil)
	u := f.usage(req, res, req.MaxTokens)
	text := generate(sampleSeed(req, res.KV), req.MaxTokens)
	var resp any
	if req.Chat {
		resp = chatResponse{
			ID:      "chatcmpl-" + newRequestID(),
			Object:  "chat.completion",
			Created: received.Unix(),
			Model:   f.cfg.Model,
			Choices: []chatChoice{{Message: chatMessageOut{Role: "assistant", Content: text, ToolCalls: []any{}}, FinishReason: "length"}},
			Usage:   u,
		}
	} else {
		resp = completionResponse{
			ID:      "cmpl-" + newRequestID(),
			Object:  "text_completion",
			Created: received.Unix(),
			Model:   f.cfg.Model,
			Choices: []choice{{Text: text, FinishReason: "length"}},
			Usage:   u,
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		writeAPIError(w, &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: fmt.Sprintf("encode response: %v", err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(serviceTimeHeader, fmt.Sprintf("%.6f", time.Since(received).Seconds()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// dpRankHeader pins a request to one data-parallel rank, as vLLM's
// OpenAI server reads it (serving engine's _get_data_parallel_rank).
const dpRankHeader = "X-data-parallel-rank"

// dataParallelRank reads the X-data-parallel-rank header of an engine with
// size ranks: nil without it. vLLM answers a rank out of range 400
// ("data_parallel_rank N is out of range [0, size)."); a value that is not
// an integer it ignores (and balances), which the sim answers 400 as well,
// since a misspelt rank silently moved elsewhere would mislead a test.
func dataParallelRank(h http.Header, size int) (*int, *apiError) {
	v, ok := h[http.CanonicalHeaderKey(dpRankHeader)]
	if !ok {
		return nil, nil
	}
	s := strings.TrimSpace(strings.Join(v, ","))
	r, err := strconv.Atoi(s)
	if err != nil {
		return nil, badRequest("", "%s %q: data_parallel_rank must be an integer in [0, %d)", dpRankHeader, s, size)
	}
	if r < 0 || r >= size {
		return nil, badRequest("", "%s %d: data_parallel_rank %d is out of range [0, %d).", dpRankHeader, r, r, size)
	}
	return &r, nil
}

// resultError is the error answer for a failed result, counted in its
// rank's /metrics; nil for a success.
func (c *coreLink) resultError(res link.Msg, req completionRequest) *apiError {
	switch res.ErrKind {
	case link.ErrKindLoad:
		c.metrics.record(res.Stats, 0, false, req.Source != nil)
		return &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: res.Message}
	case link.ErrKindShutdown:
		return &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: res.Message}
	}
	return nil
}

// usage of a finished request that generated n tokens.
func (f *frontEnd) usage(req completionRequest, res link.Msg, n int) usage {
	u := usage{PromptTokens: len(req.Tokens), CompletionTokens: n, TotalTokens: len(req.Tokens) + n}
	if f.cfg.PromptTokensDetails {
		u.PromptTokensDetails = &promptTokensDetails{CachedTokens: res.CachedTokens}
	}
	return u
}

func newRequestID() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }

// chatResponse is vLLM's ChatCompletionResponse, the fields a client reads.
type chatResponse struct {
	ID               string       `json:"id"`
	Object           string       `json:"object"`
	Created          int64        `json:"created"`
	Model            string       `json:"model"`
	Choices          []chatChoice `json:"choices"`
	Usage            usage        `json:"usage"`
	PromptLogprobs   any          `json:"prompt_logprobs"`
	KVTransferParams any          `json:"kv_transfer_params"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     any            `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
	StopReason   any            `json:"stop_reason"`
}

type chatMessageOut struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent any    `json:"reasoning_content"`
	ToolCalls        []any  `json:"tool_calls"`
}

// simVersion is what /version answers: not a vLLM release, so a client
// can tell it talks to the sim.
const simVersion = "0.0.0+p2pfault.sim"

func (f *frontEnd) handleVersion(w http.ResponseWriter, r *http.Request) {
	if allow(w, r, http.MethodGet) {
		writeJSON(w, http.StatusOK, map[string]string{"version": simVersion})
	}
}

// handlePing is vLLM's /ping (GET or POST): /health under another name.
func (f *frontEnd) handlePing(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost:
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeAPIError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "MethodNotAllowedError",
			Message: fmt.Sprintf("%s %s: method not allowed (want GET or POST)", r.Method, r.URL.Path)})
	}
}

// generationWords is the sim's whole "model": completions are words picked
// deterministically from what the decode read (the KV digest), so equal KV
// answers equally and other KV answers otherwise.
const generationWords = "the of and to in is that for it as with was on be by at this from or an are not have but had they his her which you were all we one their there been has"

var vocabWords = strings.Fields(generationWords)

// sampleSeed is what picks a request's words: greedy decoding (temperature
// 0, or none given: the sim serves no generation config) reads the KV
// digest alone, so the same KV gives the same text on any engine; sampling
// (temperature > 0) mixes in the request's seed, or a random draw without
// one, as a sampler's random numbers would.
func sampleSeed(req completionRequest, kv uint64) uint64 {
	if req.Temperature == 0 {
		return kv
	}
	s := rand.Uint64()
	if req.Seed != nil {
		s = uint64(*req.Seed)
	}
	h := fnv.New64a()
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], kv)
	binary.LittleEndian.PutUint64(buf[8:], s)
	_, _ = h.Write(buf[:])
	return h.Sum64()
}

// generatedWords are the n words a request generates, one per token, from
// its sampleSeed.
func generatedWords(seed uint64, n int) []string {
	out := make([]string, n)
	for i := range out {
		seed = seed*6364136223846793005 + 1442695040888963407
		out[i] = vocabWords[(seed>>33)%uint64(len(vocabWords))]
	}
	return out
}

// generate is the whole completion text: each token a word after a space.
func generate(seed uint64, n int) string {
	var b strings.Builder
	for _, w := range generatedWords(seed, n) {
		b.WriteByte(' ')
		b.WriteString(w)
	}
	return b.String()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{
		"message": e.Message, "type": e.Type, "param": param, "code": e.Status,
	}})
}
