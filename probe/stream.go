package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// streamFields ask for a streamed pull with the usage chunk, which carries
// usage.prompt_tokens_details.cached_tokens.
const streamFields = `,"stream":true,"stream_options":{"include_usage":true}`

// readStream reads a streamed answer (server-sent events, "data: {json}"
// then "data: [DONE]"): r.ttft is the time from start to the first event
// with a choice (a token; a chat stream's role chunk comes with its first
// token), r.text is the choices' texts joined, usage comes from the chunk
// that has it. An error event (vLLM's
// answer to an engine failure after the 200) sets r.status to its code and
// r.err to its message. A stream cut before [DONE] is an error.
func readStream(r *result, body io.Reader, start time.Time, who string) error {
	br := bufio.NewReaderSize(io.LimitReader(body, maxBody), 4096)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("%s streamed an event line over %d bytes", who, br.Size())
		}
		if err != nil && len(line) == 0 {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%s's stream ended without data: [DONE]", who)
			}
			return err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			if r.ttft == 0 && r.err == "" {
				r.err = fmt.Sprintf("%s's stream ended with no token", who)
			}
			return nil
		}
		var ev struct {
			Choices []choice        `json:"choices"`
			Usage   json.RawMessage `json:"usage"`
			Error   *struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			r.err = fmt.Sprintf("%s streamed an event that is not valid JSON (%v): %s", who, err, snippet(data))
			return nil
		}
		switch {
		case ev.Error != nil:
			r.err = fmt.Sprintf("%s streamed an error: %s", who, ev.Error.Message)
			if ev.Error.Code >= 400 {
				r.status = ev.Error.Code
			}
		case len(ev.Choices) > 0 && r.ttft == 0:
			r.ttft = time.Since(start)
		}
		r.takeText(ev.Choices)
		if len(ev.Usage) > 0 && string(ev.Usage) != "null" {
			parseUsage(r, append(append([]byte(`{"usage":`), ev.Usage...), '}'), who)
		}
	}
}
