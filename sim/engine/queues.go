package engine

// Queues are the scheduler's queue lengths after a step, as vLLM's
// SchedulerStats carry them from the engine core to the API server, which
// sets the gauges vllm:num_requests_running and vllm:num_requests_waiting.
// A request held on a lookup, a handshake or a KV load is waiting, as
// vLLM's scheduler keeps a deferred (RETRY) or WAITING_FOR_REMOTE_KVS
// request in its waiting queue, and a request is running from the first
// step that schedules tokens of it (a prompt the token budget has not
// reached yet waits, sched.go).
type Queues struct {
	Running int
	Waiting int
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
	return q, usedBlocks
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
