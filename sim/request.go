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

// completionRequest is a validated POST /v1/completions or
// /v1/chat/completions body.
type completionRequest struct {
	Tokens      []int32
	MaxTokens   int
	Temperature float64
	Seed        *int64 // per-request sampling seed (used only when temperature > 0)
	CacheSalt   string
	Source      *engine.RemoteSource // remote_kv_source or remote_prefiller
	// RemoteDecoder is remote_decoder.kv_request_id: a PD prefill leg,
	// whose blocks the engine parks for the decoder that fetches that id.
	RemoteDecoder string
	// DPRank is the X-data-parallel-rank header's rank (nil: the balancer
	// picks one).
	DPRank *int

	Chat            bool // /v1/chat/completions: answer as chat.completion
	Stream          bool // answer as server-sent events (stream.go)
	IncludeUsage    bool // stream_options.include_usage: a last chunk with usage
	ContinuousUsage bool // stream_options.continuous_usage_stats: usage on every chunk
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
	top, apiErr := decodeTop(body, model)
	if apiErr != nil {
		return out, apiErr
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
	return out, decodeSampling(top, &out, defaultMaxTokens, maxModelLen)
}

// decodeTop checks that body is one JSON object and that its model, if
// given, is the one served.
func decodeTop(body []byte, model string) (map[string]json.RawMessage, *apiError) {
	var top map[string]json.RawMessage
	if err := strictUnmarshal(body, &top); err != nil {
		return nil, badRequest("", "request body is not a JSON object: %v", err)
	}
	if top == nil {
		return nil, badRequest("", "request body is not a JSON object: got null")
	}
	if raw, ok := top["model"]; ok && !isNull(raw) {
		var m string
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, badRequest("model", "model must be a string")
		}
		if m != model {
			return nil, &apiError{Status: http.StatusNotFound, Type: "NotFoundError", Param: "model",
				Message: fmt.Sprintf("The model `%s` does not exist.", m)}
		}
	}
	return top, nil
}

// decodeSampling reads the fields completions and chat share, for
// out.Tokens already set: max_tokens (chat: also max_completion_tokens,
// which wins), temperature, stream, stream_options, cache_salt and
// kv_transfer_params. defMax 0 means vLLM's chat default: the rest of the
// context.
func decodeSampling(top map[string]json.RawMessage, out *completionRequest, defMax, maxModelLen int) *apiError {
	if e := decodeMaxTokens(top, out, defMax, maxModelLen); e != nil {
		return e
	}
	if raw, ok := top["temperature"]; ok && !isNull(raw) {
		var t float64
		if err := json.Unmarshal(raw, &t); err != nil {
			return badRequest("temperature", "temperature must be a number, got %s", clip(raw))
		}
		if t < 0 {
			return badRequest("temperature", "temperature must be non-negative, got %g", t)
		}
		out.Temperature = t
	}
	if raw, ok := top["seed"]; ok && !isNull(raw) {
		n, err := jsonInteger(raw)
		if err != nil {
			return badRequest("seed", "seed must be an integer, got %s", clip(raw))
		}
		out.Seed = &n
	}
	if e := decodeStream(top, out); e != nil {
		return e
	}
	if raw, ok := top["n"]; ok && !isNull(raw) {
		if n, err := jsonInteger(raw); err != nil || n != 1 {
			return badRequest("n", "n must be 1 (the simulated engine gives one choice), got %s", clip(raw))
		}
	}
	if raw, ok := top["cache_salt"]; ok && !isNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || s == "" {
			return badRequest("cache_salt", "cache_salt must be a non-empty string, got %s", clip(raw))
		}
		out.CacheSalt = s
	}
	if raw, ok := top["kv_transfer_params"]; ok && !isNull(raw) {
		src, decoder, apiErr := decodeKVTransferParams(raw)
		if apiErr != nil {
			return apiErr
		}
		out.Source, out.RemoteDecoder = src, decoder
	}
	return nil
}

// decodeMaxTokens reads max_tokens (and a chat's max_completion_tokens),
// defaulting to defMax or, without one, the room the prompt leaves, and
// refuses a request that does not fit the model's context as vLLM does.
func decodeMaxTokens(top map[string]json.RawMessage, out *completionRequest, defMax, maxModelLen int) *apiError {
	out.MaxTokens = defMax
	if defMax == 0 {
		out.MaxTokens = maxModelLen - len(out.Tokens)
	}
	keys := []string{"max_tokens"}
	if out.Chat {
		keys = append(keys, "max_completion_tokens")
	}
	for _, key := range keys {
		raw, ok := top[key]
		if !ok || isNull(raw) {
			continue
		}
		n, err := jsonInteger(raw)
		if err != nil {
			return badRequest(key, "%s must be an integer, got %s", key, clip(raw))
		}
		if n < 1 {
			return badRequest(key, "%s must be at least 1, got %d", key, n)
		}
		if n > int64(maxModelLen) {
			return badRequest(key, "%s %d is over the model's maximum context length of %d tokens", key, n, maxModelLen)
		}
		out.MaxTokens = int(n)
	}
	if total := len(out.Tokens) + out.MaxTokens; total > maxModelLen || out.MaxTokens < 1 {
		what := "prompt"
		if out.Chat {
			what = "messages"
		}
		n := max(out.MaxTokens, 1) // a chat prompt filling the context leaves no room for one token
		return badRequest(what, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the %s, %d for the completion). Please reduce the length of the %s or max_tokens.",
			maxModelLen, len(out.Tokens)+n, len(out.Tokens), what, n, what)
	}
	return nil
}

// decodeStream reads stream and its stream_options.
func decodeStream(top map[string]json.RawMessage, out *completionRequest) *apiError {
	if raw, ok := top["stream"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &out.Stream); err != nil {
			return badRequest("stream", "stream must be a boolean, got %s", clip(raw))
		}
	}
	raw, ok := top["stream_options"]
	if !ok || isNull(raw) {
		return nil
	}
	if !out.Stream {
		// vLLM's words (protocol.py, check_stream_options).
		return badRequest("stream_options", "Stream options can only be defined when `stream=True`.")
	}
	var so map[string]json.RawMessage
	if err := json.Unmarshal(raw, &so); err != nil || so == nil {
		return badRequest("stream_options", "stream_options must be an object, got %s", clip(raw))
	}
	for key, dst := range map[string]*bool{"include_usage": &out.IncludeUsage, "continuous_usage_stats": &out.ContinuousUsage} {
		if v, ok := so[key]; ok && !isNull(v) {
			if err := json.Unmarshal(v, dst); err != nil {
				return badRequest("stream_options", "stream_options.%s must be a boolean, got %s", key, clip(v))
			}
		}
	}
	return nil
}

// decodeTokenIDs reads a JSON array of token ids.
func decodeTokenIDs(raw json.RawMessage, param string) ([]int32, *apiError) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest(param, "%s is not a valid array: %v", param, err)
	}
	if len(items) == 0 {
		return nil, badRequest(param, "%s is empty", param)
	}
	toks := make([]int32, len(items))
	for i, it := range items {
		switch firstByte(it) {
		case '"', '[':
			return nil, badRequest(param, "batched prompts (a list of strings or of token lists) are not supported: give one prompt")
		}
		n, err := jsonInteger(it)
		if err != nil {
			return nil, badRequest(param, "%s token at index %d is not an integer: %s", param, i, clip(it))
		}
		if n < 0 || n >= kv.Vocab {
			return nil, badRequest(param, "%s token id %d at index %d is out of range [0, %d)", param, n, i, kv.Vocab)
		}
		toks[i] = int32(n)
	}
	return toks, nil
}

func decodePrompt(raw json.RawMessage) ([]int32, *apiError) {
	switch firstByte(raw) {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("prompt", "prompt is not a valid string: %v", err)
		}
		toks := tokenize(s)
		if len(toks) == 0 {
			return nil, badRequest("prompt", "prompt is empty")
		}
		return toks, nil
	case '[':
		return decodeTokenIDs(raw, "prompt")
	}
	return nil, badRequest("prompt", "prompt must be a string or an array of token ids, got %s", clip(raw))
}

// decodeKVTransferParams reads the P2P tier's role keys (vLLM docs,
// "Orchestration-Layer Protocol"): remote_kv_source (a pull), remote_prefiller
// (a PD decode leg) and remote_decoder (a PD prefill leg). Each names the
// remote counterpart; remote_decoder with remote_kv_source is the only legal
// pair.
func decodeKVTransferParams(raw json.RawMessage) (src *engine.RemoteSource, decoder string, apiErr *apiError) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(raw, &params); err != nil || params == nil {
		return nil, "", badRequest("kv_transfer_params", "kv_transfer_params must be an object, got %s", clip(raw))
	}
	_, pf := params["remote_prefiller"]
	_, ks := params["remote_kv_source"]
	_, rd := params["remote_decoder"]
	switch {
	case pf && ks:
		return nil, "", badRequest("kv_transfer_params", "kv_transfer_params: remote_prefiller and remote_kv_source name two competing fetch sources: give one")
	case pf && rd:
		return nil, "", badRequest("kv_transfer_params", "kv_transfer_params: remote_prefiller and remote_decoder are contradictory roles (a decode leg and a prefill leg): give one")
	}
	for _, key := range sortedKeys(params) {
		v := params[key]
		switch key {
		case "remote_kv_source", "remote_prefiller":
			s, apiErr := decodeRemotePeer(v, key)
			if apiErr != nil {
				return nil, "", apiErr
			}
			s.Prefiller = key == "remote_prefiller"
			src = s
		case "remote_decoder":
			const where = "kv_transfer_params.remote_decoder"
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil || m == nil {
				return nil, "", badRequest("kv_transfer_params", "%s must be an object, got %s", where, clip(v))
			}
			for _, k := range sortedKeys(m) {
				if k != "kv_request_id" {
					return nil, "", badRequest("kv_transfer_params", "%s: unknown key %q", where, k)
				}
			}
			id, apiErr := nonEmptyString(m, "kv_request_id", where)
			if apiErr != nil {
				return nil, "", apiErr
			}
			decoder = id
		default:
			return nil, "", badRequest("kv_transfer_params", "kv_transfer_params: unknown key %q (want remote_kv_source, remote_prefiller or remote_decoder)", key)
		}
	}
	return src, decoder, nil
}

// decodeRemotePeer reads remote_kv_source or remote_prefiller: the peer's
// P2P address, matched literally, and the transaction's kv_request_id.
func decodeRemotePeer(raw json.RawMessage, key string) (*engine.RemoteSource, *apiError) {
	where := "kv_transfer_params." + key
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
