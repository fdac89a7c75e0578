package engine

import "time"

// The scheduler's batch (sim/MODEL.md, "Load: the scheduler pays for it",
// mechanisms 18 and 19). vLLM's
// engine core runs one loop per engine: schedule a batch, serve the P2P
// tier (TieringOffloadingManager.on_schedule_end → serve_external_requests,
// once per step), execute the model, apply its output, and again. While the
// model executes the loop does nothing else, so what peers send meanwhile
// waits for the step's end. Here a Step that finds the last batch still
// executing (now before busyUntil) returns at once, and the first Step
// after its end lands the batch's prefill chunks before it reads the inbox.

// DefaultMaxNumBatchedTokens is vLLM's token budget per step for the
// OpenAI API server on a GPU under 70 GiB or an A100 (engine/arg_utils.py
// get_batch_defaults; also SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS in
// config/scheduler.py). On larger GPUs the server's default is 8192.
const DefaultMaxNumBatchedTokens = 2048

// schedule builds the next step's batch in submission order, as vLLM's
// FCFS scheduler with chunked prefill does: each decoding request takes one
// token of the budget, each prefilling one the rest of its prompt or what
// is left of the budget; a request the budget does not reach waits. It sets
// how long the batch executes and returns the prefill tokens it scheduled.
func (e *Engine) schedule() int {
	budget := e.cfg.MaxNumBatchedTokens
	prefill := 0
	var ctx int64                    // Σ of the positions of the tokens scheduled (attention)
	var decoding, stalled []*request // stalled: decoding, but no budget left this step
	for _, r := range e.active {
		switch r.state {
		case rsDecode:
			if budget == 0 {
				stalled = append(stalled, r)
				continue
			}
			budget--
			decoding = append(decoding, r)
			ctx += int64(len(r.in.Tokens)) // its context: the prompt (and the few tokens after it)
		case rsPrefill:
			if n := min(r.toCompute-r.computed, budget); n > 0 {
				r.sched = n
				r.admitted = true
				budget -= n
				prefill += n
				ctx += chunkContext(len(r.in.Tokens)-r.toCompute+r.computed, n) // after its cached prefix
			}
		}
	}
	if prefill == 0 {
		// A decode-only step is shorter than the tick at the sim's
		// defaults (2 ms < 5 ms): decode keeps its own clock (wakeAt).
		// What the loop did this step (a peer's registration) still
		// holds it.
		e.busyUntil = e.now.Add(e.loopWork)
		return 0
	}
	d := e.stepLen(prefill, len(decoding), ctx)
	e.busyUntil = e.now.Add(e.loopWork + d)
	// A decoding request gets one token per step: a step longer than a
	// decode step delays the rest of its decode by the difference, and one
	// the budget did not reach by the whole step.
	for _, r := range decoding {
		r.wakeAt = r.wakeAt.Add(max(d-e.cfg.DecodePerToken, 0))
	}
	for _, r := range stalled {
		r.wakeAt = r.wakeAt.Add(d)
	}
	return prefill
}

// stepLen is how long a batch executes: every token it schedules, prefill
// or decode, costs the per-token compute (PrefillPerToken, the sim's cost of
// a prompt token: 384 of them ≈ 10 ms, as the seed's local prefill) and its
// attention over the context before it (ctx, the sum of the tokens'
// positions, at PrefillPerToken per AttentionContext positions: the FLOPs
// of a token at position p are 2N + 2·n_layer·d_attn·p, Kaplan et al. 2020
// Table 1), and a batch that decodes takes at least one decode step
// (DecodePerToken: a forward pass reads the weights whatever the batch, so
// decoding one request or many costs the same until compute dominates).
func (e *Engine) stepLen(prefill, decoding int, ctx int64) time.Duration {
	compute := time.Duration(prefill+decoding) * e.cfg.PrefillPerToken
	if a := e.cfg.AttentionContext; a > 0 {
		compute += time.Duration(ctx * int64(e.cfg.PrefillPerToken) / int64(a))
	}
	if decoding > 0 {
		return max(compute, e.cfg.DecodePerToken)
	}
	return compute
}

// chunkContext is the sum of the positions of a prefill chunk's n tokens
// from position from: from, from+1, … from+n-1.
func chunkContext(from, n int) int64 {
	return int64(n)*int64(from) + int64(n)*int64(n-1)/2
}

// landBatch applies the output of the batch that has finished executing:
// its prefill chunks are computed.
func (e *Engine) landBatch() {
	for _, r := range e.active {
		if r.sched > 0 {
			r.computed += r.sched
			r.sched = 0
		}
	}
}

// executing reports whether the last batch is still on the GPU at now.
func (e *Engine) executing(now time.Time) bool { return now.Before(e.busyUntil) }

// registerPeer is NixlTransport.add_remote_peer, which P2PSession._on_connect
// calls inside the scheduler's P2P poll before it sends connect_ack:
// add_remote_agent, then a descriptor per CPU block of the peer
// (get_xfer_descs, prep_xfer_dlist). The loop does it before the batch, so
// what the step sends after it (the ack) leaves at its end (conn.go
// outFrame) and the batch starts that much later. The sim's connect carries
// no block count: the peer is taken to have this engine's CPU tier, as
// p2pfault launches every engine alike.
func (e *Engine) registerPeer() {
	e.loopWork += time.Duration(e.cfg.CPUBlocks) * e.cfg.RegisterPerBlock
}
