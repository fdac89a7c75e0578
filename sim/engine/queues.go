package engine

// Queues are the scheduler's queue lengths after a step, as vLLM's
// SchedulerStats carry them from the engine core to the API server, which
// sets the gauges vllm:num_requests_running and vllm:num_requests_waiting.
// A request held on a lookup, a handshake or a KV load is waiting, as
// vLLM's scheduler keeps a deferred (RETRY) or WAITING_FOR_REMOTE_KVS
// request in its waiting queue, and a request is running from the first
// step that schedules tokens of it (a prompt the token budget has not
// reached yet waits, sched.go).
//
// Beside them, the sim reports what vLLM's P2P tier keeps but exports no
// metric of (reference §5): the stores parked on this engine waiting for
// a fetch and the blocks they pin. A PD prefill's stores no fetch has
// bound yet (manager.py _unbound_stores, reaped after
// unbound_store_timeout_s by _reap_unbound_stores) are Unbound; a
// symmetric pull's lookup hits, pinned until their fetch (server.py's
// store job of a HIT, failed after _STORE_TIMEOUT_S or when the session
// dies), are Lookup.
type Queues struct {
	Running int
	Waiting int
	Parked  Parked
}

// Parked are a producer's stores waiting for a fetch, by kind, and the
// blocks they pin.
type Parked struct {
	Unbound, UnboundBlocks int
	Lookup, LookupBlocks   int
}

// OnQueues sets fn to be told the queues after the first step and after
// every step that changed them, on the stepping goroutine (fn must not
// block). Call it before Run or Step.
func (e *Engine) OnQueues(fn func(Queues)) { e.onQueues = fn }

// queues counts the live requests by queue, and the GPU blocks the running
// ones hold.
func (e *Engine) queues() (q Queues, usedBlocks int) {
	for _, r := range e.active {
		switch r.state {
		case rsDone:
			continue
		case rsPrefill, rsDecode:
			if r.state == rsPrefill && !r.admitted {
				// Not yet given a chunk: still in vLLM's waiting queue.
				q.Waiting++
				continue
			}
			q.Running++
			// A running request holds its prompt's blocks and the one its
			// completion grows into.
			usedBlocks += (len(r.in.Tokens) + r.in.MaxTokens + e.cfg.BlockSize - 1) / e.cfg.BlockSize
		default:
			q.Waiting++
		}
	}
	q.Parked = e.parkedNow()
	return q, usedBlocks
}

// parkedNow counts the stores parked here waiting for a fetch: the PD
// stores no fetch has bound (a store the reuse-freed-blocks defect freed
// pins nothing) and the lookup hits still pinned (a lapsed one no longer
// pins).
func (e *Engine) parkedNow() Parked {
	var p Parked
	for _, st := range e.parked {
		if st.c == nil && !st.freed && len(st.keys) > 0 {
			p.Unbound++
			p.UnboundBlocks += len(st.keys)
		}
	}
	for _, ps := range e.pins {
		if !ps.lapsed {
			p.Lookup++
			p.LookupBlocks += len(ps.keys)
		}
	}
	return p
}

func (e *Engine) reportQueues() {
	if e.onQueues == nil {
		return
	}
	q, _ := e.queues()
	if e.queuesSent && q == e.lastQueues {
		return
	}
	e.onQueues(q)
	e.lastQueues, e.queuesSent = q, true
}
