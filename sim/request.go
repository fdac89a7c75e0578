package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"p2pfault/sim/engine"
	"p2pfault/sim/kv"
)

// completionRequest is a validated POST /v1/completions body.
type completionRequest struct {
	Tokens      []int32
	MaxTokens   int
	Temperature float64
	CacheSalt   string
	Source      *engine.RemoteSource
}

// defaultMaxTokens is OpenAI's and vLLM's default for completions.
const defaultMaxTokens = 16

// apiError is an OpenAI-style error answer.
type apiError struct {
	Status  int
	Type    string
	Message string
	Param   string // "" → null
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "BadRequestError", Message: fmt.Sprintf(format, args...), Param: param}
}

// decodeCompletionRequest validates a completions body for an engine
// serving model with a context of maxModelLen tokens. Unknown top-level
// keys are ignored, as vLLM does; unknown keys under kv_transfer_params are
// errors, since a misspelt one would silently turn a pull into a prefill.
func decodeCompletionRequest(body []byte, model string, maxModelLen int) (completionRequest, *apiError) {
	var out completionRequest
	var top map[string]json.RawMessage
	if err := strictUnmarshal(body, &top); err != nil {
		return out, badRequest("", "request body is not a JSON object: %v", err)
	}
	if top == nil {
		return out, badRequest("", "request body is not a JSON object: got null")
	}
	if raw, ok := top["model"]; ok && !isNull(raw) {
		var m string
		if err := json.Unmarshal(raw, &m); err != nil {
			return out, badRequest("model", "model must be a string")
		}
		if m != model {
			return out, &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Param: "model",
				Message: fmt.Sprintf("The model `%s` does not exist.", m)}
		}
	}
	raw, ok := top["prompt"]
	if !ok || isNull(raw) {
		return out, badRequest("prompt", "prompt is required")
	}
	toks, apiErr := decodePrompt(raw)
	if apiErr != nil {
		return out, apiErr
	}
	out.Tokens = toks

	out.MaxTokens = defaultMaxTokens
	if raw, ok := top["max_tokens"]; ok && !isNull(raw) {
		n, err := jsonInteger(raw)
		if err != nil {
			return out, badRequest("max_tokens", "max_tokens must be an integer, got %s", clip(raw))
		}
		if n < 1 {
			return out, badRequest("max_tokens", "max_tokens must be at least 1, got %d", n)
		}
		if n > int64(maxModelLen) {
			return out, badRequest("max_tokens", "max_tokens %d is over the model's maximum context length of %d tokens", n, maxModelLen)
		}
		out.MaxTokens = int(n)
	}
	if total := len(out.Tokens) + out.MaxTokens; total > maxModelLen {
		return out, badRequest("prompt", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Please reduce the length of the prompt or max_tokens.",
			maxModelLen, total, len(out.Tokens), out.MaxTokens)
	}
	if raw, ok := top["temperature"]; ok && !isNull(raw) {
		var t float64
		if err := json.Unmarshal(raw, &t); err != nil {
			return out, badRequest("temperature", "temperature must be a number, got %s", clip(raw))
		}
		if t < 0 {
			return out, badRequest("temperature", "temperature must be non-negative, got %g", t)
		}
		out.Temperature = t
	}
	if raw, ok := top["stream"]; ok && !isNull(raw) {
		var s bool
		if err := json.Unmarshal(raw, &s); err != nil {
			return out, badRequest("stream", "stream must be a boolean, got %s", clip(raw))
		}
		if s {
			return out, badRequest("stream", "stream=true is not supported by the simulated engine")
		}
	}
	if raw, ok := top["cache_salt"]; ok && !isNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || s == "" {
			return out, badRequest("cache_salt", "cache_salt must be a non-empty string, got %s", clip(raw))
		}
		out.CacheSalt = s
	}
	if raw, ok := top["kv_transfer_params"]; ok && !isNull(raw) {
		src, apiErr := decodeKVTransferParams(raw)
		if apiErr != nil {
			return out, apiErr
		}
		out.Source = src
	}
	return out, nil
}

func decodePrompt(raw json.RawMessage) ([]int32, *apiError) {
	switch firstByte(raw) {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("prompt", "prompt is not a valid string: %v", err)
		}
		toks := kv.Tokenize(s)
		if len(toks) == 0 {
			return nil, badRequest("prompt", "prompt is empty")
		}
		return toks, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, badRequest("prompt", "prompt is not a valid array: %v", err)
		}
		if len(items) == 0 {
			return nil, badRequest("prompt", "prompt is empty")
		}
		toks := make([]int32, len(items))
		for i, it := range items {
			switch firstByte(it) {
			case '"', '[':
				return nil, badRequest("prompt", "batched prompts (a list of strings or of token lists) are not supported: give one prompt")
			}
			n, err := jsonInteger(it)
			if err != nil {
				return nil, badRequest("prompt", "prompt token at index %d is not an integer: %s", i, clip(it))
			}
			if n < 0 || n >= kv.Vocab {
				return nil, badRequest("prompt", "prompt token id %d at index %d is out of range [0, %d)", n, i, kv.Vocab)
			}
			toks[i] = int32(n)
		}
		return toks, nil
	}
	return nil, badRequest("prompt", "prompt must be a string or an array of token ids, got %s", clip(raw))
}

func decodeKVTransferParams(raw json.RawMessage) (*engine.RemoteSource, *apiError) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(raw, &params); err != nil {
		return nil, badRequest("kv_transfer_params", "kv_transfer_params must be an object, got %s", clip(raw))
	}
	var src *engine.RemoteSource
	for _, key := range sortedKeys(params) {
		v := params[key]
		switch key {
		case "remote_kv_source":
			s, apiErr := decodeRemoteKVSource(v)
			if apiErr != nil {
				return nil, apiErr
			}
			src = s
		case "remote_decoder":
			// The PD producer leg: its blocks are offloaded as any
			// request's are, so the id is only checked.
			var rd map[string]json.RawMessage
			if err := json.Unmarshal(v, &rd); err != nil || rd == nil {
				return nil, badRequest("kv_transfer_params", "kv_transfer_params.remote_decoder must be an object")
			}
			for k := range rd {
				if k != "kv_request_id" {
					return nil, badRequest("kv_transfer_params", "kv_transfer_params.remote_decoder: unknown key %q", k)
				}
			}
			if _, apiErr := nonEmptyString(rd, "kv_request_id", "kv_transfer_params.remote_decoder"); apiErr != nil {
				return nil, apiErr
			}
		default:
			return nil, badRequest("kv_transfer_params", "kv_transfer_params: unknown key %q (want remote_kv_source)", key)
		}
	}
	return src, nil
}

func decodeRemoteKVSource(raw json.RawMessage) (*engine.RemoteSource, *apiError) {
	const where = "kv_transfer_params.remote_kv_source"
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, badRequest("kv_transfer_params", "%s must be an object, got %s", where, clip(raw))
	}
	for _, k := range sortedKeys(m) {
		switch k {
		case "kv_request_id", "remote_host", "remote_port":
		default:
			return nil, badRequest("kv_transfer_params", "%s: unknown key %q", where, k)
		}
	}
	id, apiErr := nonEmptyString(m, "kv_request_id", where)
	if apiErr != nil {
		return nil, apiErr
	}
	host, apiErr := nonEmptyString(m, "remote_host", where)
	if apiErr != nil {
		return nil, apiErr
	}
	rawPort, ok := m["remote_port"]
	if !ok {
		return nil, badRequest("kv_transfer_params", "%s.remote_port is required", where)
	}
	port, err := jsonInteger(rawPort)
	if err != nil || port < 1 || port > 65535 {
		return nil, badRequest("kv_transfer_params", "%s.remote_port must be an integer in 1..65535, got %s", where, clip(rawPort))
	}
	return &engine.RemoteSource{KVRequestID: id, Host: host, Port: int(port)}, nil
}

func nonEmptyString(m map[string]json.RawMessage, key, where string) (string, *apiError) {
	raw, ok := m[key]
	if !ok {
		return "", badRequest("kv_transfer_params", "%s.%s is required", where, key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", badRequest("kv_transfer_params", "%s.%s must be a non-empty string, got %s", where, key, clip(raw))
	}
	return s, nil
}

// strictUnmarshal decodes one JSON value and rejects trailing data.
func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// jsonInteger parses an integral JSON number (16, not 16.5 or "16").
func jsonInteger(raw json.RawMessage) (int64, error) {
	// json.Number would also take a quoted number.
	if c := firstByte(raw); c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("not a number: %s", clip(raw))
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return 0, err
	}
	return strconv.ParseInt(n.String(), 10, 64)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// clip shows a value in an error message, shortened.
func clip(raw json.RawMessage) string {
	const max = 40
	t := bytes.TrimSpace(raw)
	if len(t) > max {
		return string(t[:max]) + "..."
	}
	return string(t)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
