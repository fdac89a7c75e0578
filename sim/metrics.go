package sim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"p2pfault/sim/engine"
)

// metrics are the reference §5 counters the sim counts honestly, one set
// per data-parallel rank. The front end keeps them from each request's result, so /metrics answers even while
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
	// The offload connector's lookup delays, on the side that looks up
	// (the decoder of a pull).
	lookupSync, lookupAsync histogram
}

// vLLM's buckets for the two lookup-delay histograms, in seconds
// (distributed/kv_transfer/kv_connector/v1/offloading/metrics.py,
// get_connector_metric_definitions).
var (
	lookupSyncBuckets  = []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1}
	lookupAsyncBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
)

// newMetrics is one rank's counters, empty.
func newMetrics() *metrics {
	return &metrics{lookupSync: newHistogram(lookupSyncBuckets), lookupAsync: newHistogram(lookupAsyncBuckets)}
}

// histogram is a Prometheus histogram: cumulative bucket counts, sum, count.
type histogram struct {
	bounds []float64
	counts []int64 // counts[i]: observations ≤ bounds[i]
	sum    float64
	count  int64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]int64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
		}
	}
	h.sum += v
	h.count++
}

// write renders h's samples as prometheus_client does: a bucket per bound
// and +Inf, then _sum and _count (the caller writes HELP and TYPE once).
func (h *histogram) write(w io.Writer, name, labels string) error {
	for i, b := range h.bounds {
		if _, err := fmt.Fprintf(w, "%s_bucket{%s,le=%q} %d\n", name, labels, promFloat(b), h.counts[i]); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %s\n%s_count{%s} %d\n",
		name, labels, h.count, name, labels, strconv.FormatFloat(h.sum, 'g', -1, 64), name, labels, h.count)
	return err
}

// promFloat formats a bucket bound as Python's repr of a float does
// ("1.0", "0.0001", "1e-05"), the le values vLLM's /metrics shows.
func promFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
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
	if st.LookupSync > 0 {
		// vLLM observes no sync delay for a lookup that took no time.
		m.lookupSync.observe(st.LookupSync.Seconds())
	}
	if st.LookupDeferred {
		m.lookupAsync.observe(st.LookupAsync.Seconds())
	}
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

// series is one metric of /metrics: each rank's sample of it (engine
// label), or one sample summed over the ranks (perEngine false).
type series struct {
	name, help, labels string // labels after model_name and engine
	perEngine          bool
	v                  func(m *metrics) int64
}

// vLLM's v1 PrometheusStatLogger labels its per-engine series with
// model_name and engine (the data-parallel rank); the sim does the same
// for every series it counts per rank.
var counterSeries = []series{
	{"vllm:request_success_total", "Count of successfully processed requests.", `finished_reason="length"`, true, func(m *metrics) int64 { return m.success }},
	{"vllm:request_success_total", "", `finished_reason="abort"`, true, func(m *metrics) int64 { return m.aborted }},
	{"vllm:prompt_tokens_total", "Number of prefill tokens processed.", "", true, func(m *metrics) int64 { return m.promptTokens }},
	{"vllm:generation_tokens_total", "Number of generation tokens processed.", "", true, func(m *metrics) int64 { return m.generationTokens }},
	{"vllm:prefix_cache_queries_total", "Prefix cache queries, in tokens (GPU).", "", true, func(m *metrics) int64 { return m.gpuQueries }},
	{"vllm:prefix_cache_hits_total", "Prefix cache hits, in tokens (GPU).", "", true, func(m *metrics) int64 { return m.gpuHits }},
	{"vllm:external_prefix_cache_queries_total", "External prefix cache queries, in tokens (KV connector).", "", true, func(m *metrics) int64 { return m.extQueries }},
	{"vllm:external_prefix_cache_hits_total", "External prefix cache hits, in tokens (KV connector: own CPU tier and P2P).", "", true, func(m *metrics) int64 { return m.extHits }},
	{"vllm:kv_offload_tiering_read_bytes_total", "Bytes read from an offload tier.", `tier="0:primary"`, false, func(m *metrics) int64 { return m.primaryReadBytes }},
	{"vllm:kv_offload_tiering_read_bytes_total", "", `tier="1:p2p"`, false, func(m *metrics) int64 { return m.p2pReadBytes }},
	{"sim:request_failure_total", "Requests that failed in the engine (a KV load under kv_load_failure_policy=fail). Sim only.", "", true, func(m *metrics) int64 { return m.failed }},
	{"sim:p2p_pull_requests_total", "Requests that named a remote_kv_source. Sim only.", "", true, func(m *metrics) int64 { return m.requestsWithSource }},
	{"sim:p2p_pull_hits_total", "Of those, requests that loaded blocks over P2P. Sim only.", "", true, func(m *metrics) int64 { return m.p2pHits }},
}

// gaugeSeries are vLLM's scheduler gauges, from each core's last report.
var gaugeSeries = []series{
	{"vllm:num_requests_running", "Number of requests in model execution batches.", "", true, func(m *metrics) int64 { return int64(m.queues.Running) }},
	{"vllm:num_requests_waiting", "Number of requests waiting to be processed.", "", true, func(m *metrics) int64 { return int64(m.queues.Waiting) }},
	// vLLM's P2P tier keeps these but exports no metric of them (reference
	// §5): the sim's own, so that a run can watch a decoder's fault leave
	// stores parked on its sources and see them reaped.
	{"sim:p2p_parked_stores", "Stores parked on this engine waiting for a fetch: kind=\"unbound\" a PD prefill's stores no fetch has bound (manager.py _unbound_stores, reaped after unbound_store_timeout_s), kind=\"lookup\" a pull's lookup hits pinned until their fetch. Sim only.", `kind="unbound"`, true, func(m *metrics) int64 { return int64(m.queues.Parked.Unbound) }},
	{"sim:p2p_parked_stores", "", `kind="lookup"`, true, func(m *metrics) int64 { return int64(m.queues.Parked.Lookup) }},
	{"sim:p2p_pinned_blocks", "CPU-tier blocks pinned by the parked stores, by the same kinds. Sim only.", `kind="unbound"`, true, func(m *metrics) int64 { return int64(m.queues.Parked.UnboundBlocks) }},
	{"sim:p2p_pinned_blocks", "", `kind="lookup"`, true, func(m *metrics) int64 { return int64(m.queues.Parked.LookupBlocks) }},
}

// writeMetrics renders the Prometheus text exposition format of every
// rank's metrics.
func (f *frontEnd) writeMetrics(w io.Writer) error {
	ranks := make([]*metrics, len(f.cores))
	for i, c := range f.cores {
		ranks[i] = c.metrics
		c.metrics.mu.Lock()
		defer c.metrics.mu.Unlock()
	}
	for _, s := range gaugeSeries {
		if err := writeSeries(w, "gauge", s, f.cfg.Model, ranks); err != nil {
			return err
		}
	}
	// Labelled as vLLM's KV-connector metrics are, by model and engine
	// (the rank).
	for _, h := range []struct {
		name, help string
		of         func(m *metrics) *histogram
	}{
		{"vllm:kv_offload_lookup_sync_delay_seconds", "Histogram of the time spent in a single offload lookup call, in seconds.", func(m *metrics) *histogram { return &m.lookupSync }},
		{"vllm:kv_offload_lookup_async_delay_seconds", "Histogram of time between a request's offload lookup first deferring and the following lookup resolving, or request finish, in seconds.", func(m *metrics) *histogram { return &m.lookupAsync }},
	} {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", h.name, h.help, h.name); err != nil {
			return err
		}
		for r, m := range ranks {
			if err := h.of(m).write(w, h.name, fmt.Sprintf(`model_name=%q,engine="%d"`, f.cfg.Model, r)); err != nil {
				return err
			}
		}
	}
	for _, s := range counterSeries {
		if err := writeSeries(w, "counter", s, f.cfg.Model, ranks); err != nil {
			return err
		}
	}
	return nil
}

func writeSeries(w io.Writer, typ string, s series, model string, ranks []*metrics) error {
	if s.help != "" {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", s.name, s.help, s.name, typ); err != nil {
			return err
		}
	}
	labels := func(engine string) string {
		l := fmt.Sprintf(`model_name=%q`, model)
		if engine != "" {
			l += fmt.Sprintf(`,engine=%q`, engine)
		}
		if s.labels != "" {
			l += "," + s.labels
		}
		return l
	}
	if !s.perEngine {
		var sum int64
		for _, m := range ranks {
			sum += s.v(m)
		}
		_, err := fmt.Fprintf(w, "%s{%s} %d\n", s.name, labels(""), sum)
		return err
	}
	for r, m := range ranks {
		if _, err := fmt.Fprintf(w, "%s{%s} %d\n", s.name, labels(strconv.Itoa(r)), s.v(m)); err != nil {
			return err
		}
	}
	return nil
}
