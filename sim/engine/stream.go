package engine

import "time"

// Hooks are optional callbacks of one request, called on the stepping
// goroutine; they must not block. They let the front end stream tokens as
// the engine samples them and learn when a cancelled request was dropped.
type Hooks struct {
	// Token is called once per generated token, n counting from 1, when the
	// step that samples it ends: token 1 with the prompt's last prefill
	// chunk, at p, token n at p + (n-1)×DecodePerToken, seen on the first
	// tick after that (the non-streamed answer comes with the last token,
	// so a stream's last token and a plain answer arrive together).
	Token func(n int)
	// Decoding is called once, when the prefill ends and decoding starts,
	// with the digest of what the decode reads (Result.KV): the generated
	// tokens are a function of it.
	Decoding func(kv uint64)
	// Aborted is called instead of the result when the request is dropped
	// after Cancel (its client went away), with what it had cost so far
	// and how many tokens it had generated: vLLM counts such a request as
	// finished with reason "abort".
	Aborted func(st Stats, tokens int)
}

// streamState is a streamed request's progress.
type streamState struct {
	sent int // tokens handed to Hooks.Token
}

// emitTokens hands the tokens whose decode step has ended to the request's
// Token hook. Its last token, MaxTokens, is sampled at r.wakeAt.
func (e *Engine) emitTokens(r *request) {
	h := r.in.Hooks
	if h == nil || h.Token == nil || r.cancelled {
		return
	}
	if r.stream == nil {
		r.stream = &streamState{}
	}
	n := r.in.MaxTokens
	due := n
	if d := e.cfg.DecodePerToken; d > 0 && e.now.Before(r.wakeAt) {
		first := r.wakeAt.Add(-time.Duration(n-1) * d) // token 1, the prefill's end
		due = min(int(e.now.Sub(first)/d)+1, n)
	}
	for r.stream.sent < due {
		r.stream.sent++
		h.Token(r.stream.sent)
	}
}

// aborted reports a dropped request to its Aborted hook.
func (e *Engine) aborted(r *request) {
	if h := r.in.Hooks; h != nil && h.Aborted != nil && r.cancelled {
		tokens := 0
		if r.stream != nil {
			tokens = r.stream.sent
		}
		h.Aborted(r.stats, tokens)
	}
}
