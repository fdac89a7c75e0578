package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// stream answers req as vLLM's OpenAI server streams: 200 with
// text/event-stream at once, then one "data: {chunk}" event per token as
// the engine samples it (a chat stream first sends the assistant's role),
// the usage chunk when stream_options.include_usage, and "data: [DONE]".
// An engine error after the 200 is an error event, as in vLLM. A client
// that goes away cancels the request in the engine, which reports it
// aborted (counted in /metrics).
func (f *frontEnd) stream(w http.ResponseWriter, r *http.Request, req completionRequest, received time.Time) {
	c, err := f.submit(req, true)
	if err != nil {
		writeAPIError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: err.Error()})
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		f.cancel(c)
		return
	}
	enc := newChunkEncoder(req, f.cfg.Model, received)
	var words []string // known once decoding starts: they depend on the KV it reads
	buf := make([]byte, 0, 512)
	sent := 0
	for {
		select {
		case <-c.wake:
		case <-r.Context().Done():
			f.cancel(c)
			return
		case <-c.core.gone:
			f.forget(c)
			buf = enc.error(buf[:0], &apiError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableError", Message: errCoreGone.Error()})
			_, _ = w.Write(append(buf, doneEvent...))
			_ = rc.Flush()
			return
		}
		res, tokens, kv, done := c.state()
		if done {
			tokens = req.MaxTokens // a result comes after every token of its request
			kv = res.KV
		}
		if tokens > 0 && words == nil {
			words = generatedWords(sampleSeed(req, kv), req.MaxTokens)
		}
		buf = buf[:0]
		for sent < tokens {
			sent++
			buf = enc.token(buf, sent, words[sent-1])
		}
		if done {
			if apiErr := c.core.resultError(res, req); apiErr != nil {
				buf = enc.error(buf[:0], apiErr) // a failed load samples no token
			} else {
				c.core.metrics.record(res.Stats, req.MaxTokens, true, req.Source != nil)
				if req.IncludeUsage {
					buf = enc.usage(buf, f.usage(req, res, sent))
				}
			}
			_, _ = w.Write(append(buf, doneEvent...))
			_ = rc.Flush()
			return
		}
		if len(buf) == 0 {
			continue
		}
		if _, err := w.Write(buf); err != nil {
			f.cancel(c)
			return
		}
		if rc.Flush() != nil {
			f.cancel(c)
			return
		}
	}
}

const doneEvent = "data: [DONE]\n\n"

// chunkEncoder writes a stream's events; the part every chunk shares is
// encoded once.
type chunkEncoder struct {
	req    completionRequest
	head   []byte // `data: {"id":...,"model":...,"choices":[`
	usageH []byte // the same, for the usage chunk: `..."choices":[],"usage":`
}

func newChunkEncoder(req completionRequest, model string, created time.Time) *chunkEncoder {
	id, object := "cmpl-"+newRequestID(), "text_completion"
	if req.Chat {
		id, object = "chatcmpl-"+newRequestID(), "chat.completion.chunk"
	}
	h := []byte(`data: {"id":`)
	h = appendJSONString(h, id)
	h = append(h, `,"object":"`+object+`","created":`...)
	h = strconv.AppendInt(h, created.Unix(), 10)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, model)
	h = append(h, `,"choices":[`...)
	return &chunkEncoder{req: req, head: h, usageH: append(h[:len(h):len(h)], `],"usage":`...)}
}

// token appends the event of token n (from 1), whose text is " "+word.
func (e *chunkEncoder) token(b []byte, n int, word string) []byte {
	last := n == e.req.MaxTokens
	if e.req.Chat && n == 1 {
		b = append(b, e.head...)
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
		b = e.continuous(b, 0)
		b = append(b, "}\n\n"...)
	}
	b = append(b, e.head...)
	if e.req.Chat {
		b = append(b, `{"index":0,"delta":{"content":`...)
		b = appendWord(b, word)
		b = append(b, `},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `{"index":0,"text":`...)
		b = appendWord(b, word)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
	}
	if last {
		b = append(b, `"length"`...)
	} else {
		b = append(b, `null`...)
	}
	if !e.req.Chat || last {
		b = append(b, `,"stop_reason":null`...)
	}
	b = append(b, "}]"...)
	b = e.continuous(b, n)
	return append(b, "}\n\n"...)
}

// continuous adds stream_options.continuous_usage_stats' usage after n
// tokens.
func (e *chunkEncoder) continuous(b []byte, n int) []byte {
	if !e.req.ContinuousUsage {
		return b
	}
	p := len(e.req.Tokens)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(p+n), 10)
	return append(b, '}')
}

// usage appends the final usage chunk: no choices, vLLM's UsageInfo.
func (e *chunkEncoder) usage(b []byte, u usage) []byte {
	b = append(b, e.usageH...)
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	if u.PromptTokensDetails != nil {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CachedTokens), 10)
		b = append(b, '}')
	}
	return append(b, "}}\n\n"...)
}

// error appends an error event: vLLM's ErrorResponse body as the data.
func (e *chunkEncoder) error(b []byte, apiErr *apiError) []byte {
	var param any
	if apiErr.Param != "" {
		param = apiErr.Param
	}
	j, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": apiErr.Message, "type": apiErr.Type, "param": param, "code": apiErr.Status,
	}})
	b = append(b, "data: "...)
	b = append(b, j...)
	return append(b, "\n\n"...)
}

// appendWord appends " "+word as a JSON string; the words are the sim's
// own (generationWords), plain ASCII.
func appendWord(b []byte, word string) []byte {
	b = append(b, `" `...)
	b = append(b, word...)
	return append(b, '"')
}

// appendJSONString appends s as a JSON string (UTF-8 kept, invalid bytes
// replaced), without the allocation of json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
