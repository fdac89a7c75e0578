package sim

import (
	"fmt"
	"io"
	"sync"

	"p2pfault/sim/engine"
)

// metrics are the reference §5 counters the sim counts honestly. The front
// end keeps them from each request's result, so /metrics answers even while
// the engine core is stopped (vLLM's API server also serves them).
type metrics struct {
	mu                 sync.Mutex
	success            int64
	aborted            int64
	failed             int64
	promptTokens       int64
	generationTokens   int64
	gpuQueries         int64
	gpuHits            int64
	extQueries         int64
	extHits            int64
	primaryReadBytes   int64
	p2pReadBytes       int64
	p2pPulls, p2pHits  int64
	requestsWithSource int64
	queues             engine.Queues // the core's last report
}

// setQueues keeps the engine core's queue lengths for the gauges.
func (m *metrics) setQueues(q engine.Queues) {
	m.mu.Lock()
	m.queues = q
	m.mu.Unlock()
}

func (m *metrics) record(st engine.Stats, completion int, ok, pulled bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.success++
		m.generationTokens += int64(completion)
	} else {
		m.failed++
	}
	m.addStats(st, pulled)
}

func (m *metrics) addStats(st engine.Stats, pulled bool) {
	m.promptTokens += int64(st.PromptTokens)
	m.gpuQueries += int64(st.GPUQueryTokens)
	m.gpuHits += int64(st.GPUHitTokens)
	m.extQueries += int64(st.ExternalQueryTokens)
	m.extHits += int64(st.ExternalHitTokens)
	m.primaryReadBytes += st.CPUReadBytes
	m.p2pReadBytes += st.P2PReadBytes
	if pulled {
		m.requestsWithSource++
		if st.P2PReadBytes > 0 {
			m.p2pHits++
		}
	}
}

// abort counts a request dropped because its client went away, with what
// it had cost: vLLM finishes it with reason "abort" and has counted its
// prompt, cache queries and the tokens generated before the abort.
func (m *metrics) abort(st engine.Stats, tokens int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.aborted++
	m.generationTokens += int64(tokens)
	m.addStats(st, false)
}

// write renders the Prometheus text exposition format.
func (m *metrics) write(w io.Writer, model string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := fmt.Sprintf(`model_name=%q`, model)
	type series struct {
		name, help, labels string
		v                  int64
	}
	counters := []series{
		{"vllm:request_success_total", "Count of successfully processed requests.", l + `,finished_reason="length"`, m.success},
		{"vllm:request_success_total", "", l + `,finished_reason="abort"`, m.aborted},
		{"vllm:prompt_tokens_total", "Number of prefill tokens processed.", l, m.promptTokens},
		{"vllm:generation_tokens_total", "Number of generation tokens processed.", l, m.generationTokens},
		{"vllm:prefix_cache_queries_total", "Prefix cache queries, in tokens (GPU).", l, m.gpuQueries},
		{"vllm:prefix_cache_hits_total", "Prefix cache hits, in tokens (GPU).", l, m.gpuHits},
		{"vllm:external_prefix_cache_queries_total", "External prefix cache queries, in tokens (KV connector).", l, m.extQueries},
		{"vllm:external_prefix_cache_hits_total", "External prefix cache hits, in tokens (KV connector: own CPU tier and P2P).", l, m.extHits},
		{"vllm:kv_offload_tiering_read_bytes_total", "Bytes read from an offload tier.", l + `,tier="0:primary"`, m.primaryReadBytes},
		{"vllm:kv_offload_tiering_read_bytes_total", "", l + `,tier="1:p2p"`, m.p2pReadBytes},
		{"sim:request_failure_total", "Requests that failed in the engine (a KV load under kv_load_failure_policy=fail). Sim only.", l, m.failed},
		{"sim:p2p_pull_requests_total", "Requests that named a remote_kv_source. Sim only.", l, m.requestsWithSource},
		{"sim:p2p_pull_hits_total", "Of those, requests that loaded blocks over P2P. Sim only.", l, m.p2pHits},
	}
	// vLLM's scheduler gauges, labelled by engine index as its v1 API
	// server does (one core here: engine "0").
	gauges := []series{
		{"vllm:num_requests_running", "Number of requests in model execution batches.", l + `,engine="0"`, int64(m.queues.Running)},
		{"vllm:num_requests_waiting", "Number of requests waiting to be processed.", l + `,engine="0"`, int64(m.queues.Waiting)},
	}
	for _, s := range gauges {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %d\n", s.name, s.help, s.name, s.name, s.labels, s.v); err != nil {
			return err
		}
	}
	for _, s := range counters {
		if s.help != "" {
			if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", s.name, s.help, s.name); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(w, "%s{%s} %d\n", s.name, s.labels, s.v); err != nil {
			return err
		}
	}
	return nil
}
