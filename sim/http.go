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
	"net/http"
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
	if err := f.metrics.write(&buf, f.cfg.Model); err != nil {
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
	received := time.Now()
	if !allow(w, r, http.MethodPost) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeAPIError(w, badRequest("", "request body is larger than %d bytes", maxBodyBytes))
			return
		}
		writeAPIError(w, badRequest("", "read request body: %v", err))
		return
	}
	req, apiErr := decodeCompletionRequest(body, f.cfg.Model, f.cfg.MaxModelLen)
	if apiErr != nil {
		writeAPIError(w, apiErr)
		return
	}
	res, err := f.complete(r.Context(), req)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return // the client is gone
		}
		writeAPIError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: err.Error()})
		return
	}
	switch res.ErrKind {
	case link.ErrKindLoad:
		f.metrics.record(res.Stats, 0, false, req.Source != nil)
		writeAPIError(w, &apiError{Status: http.StatusInternalServerError, Type: "InternalServerError", Message: res.Message})
		return
	case link.ErrKindShutdown:
		writeAPIError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: res.Message})
		return
	}
	f.metrics.record(res.Stats, req.MaxTokens, true, req.Source != nil)
	resp := completionResponse{
		ID:      "cmpl-" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		Object:  "text_completion",
		Created: received.Unix(),
		Model:   f.cfg.Model,
		Choices: []choice{{Text: generate(req.Tokens, req.MaxTokens), FinishReason: "length"}},
		Usage: usage{
			PromptTokens:     len(req.Tokens),
			CompletionTokens: req.MaxTokens,
			TotalTokens:      len(req.Tokens) + req.MaxTokens,
		},
	}
	if f.cfg.PromptTokensDetails {
		resp.Usage.PromptTokensDetails = &promptTokensDetails{CachedTokens: res.CachedTokens}
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

// generationWords is the sim's whole "model": completions are words picked
// deterministically from the prompt, so equal requests answer equally.
const generationWords = "the of and to in is that for it as with was on be by at this from or an are not have but had they his her which you were all we one their there been has"

func generate(prompt []int32, n int) string {
	words := strings.Fields(generationWords)
	h := fnv.New64a()
	var buf [4]byte
	for _, t := range prompt {
		binary.LittleEndian.PutUint32(buf[:], uint32(t))
		_, _ = h.Write(buf[:])
	}
	seed := h.Sum64()
	var b strings.Builder
	for i := 0; i < n; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		b.WriteByte(' ')
		b.WriteString(words[(seed>>33)%uint64(len(words))])
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
