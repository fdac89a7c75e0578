package engine

import "time"

// compLoggers is the component of the periodic stats line, as vLLM's
// "[loggers.py:...]".
const compLoggers = "loggers"

// recentRequests is how many finished requests the hit rates cover, as
// vLLM's CachingMetrics (max_recent_requests=1000).
const recentRequests = 1000

// hitSample is one finished request's prefix-cache accounting, in tokens.
type hitSample struct {
	gpuQueries, gpuHits int
	extQueries, extHits int
}

// statsLog is the state of the periodic stats line. vLLM has no P2P
// session metric; operators read this line (reference §5), so the sim
// prints it in vLLM's words: throughput over the interval, the scheduler's
// queues, and the hit rates over the last recentRequests requests.
type statsLog struct {
	last                  time.Time
	promptTokens, genTkns int
	lastPromptTp, lastGen float64

	recent     []hitSample // ring of recentRequests
	next       int
	gpuQ, gpuH int // sums over recent
	extQ, extH int
}

// record adds a finished request. Only requests that ran count toward
// throughput; every request that was looked up counts toward hit rates.
func (s *statsLog) record(st Stats, ran bool, genTokens int) {
	if ran {
		s.promptTokens += st.PromptTokens
		s.genTkns += genTokens
	}
	if st.GPUQueryTokens == 0 && st.ExternalQueryTokens == 0 {
		return
	}
	h := hitSample{st.GPUQueryTokens, st.GPUHitTokens, st.ExternalQueryTokens, st.ExternalHitTokens}
	if len(s.recent) < recentRequests {
		s.recent = append(s.recent, h)
	} else {
		old := s.recent[s.next]
		s.gpuQ, s.gpuH, s.extQ, s.extH = s.gpuQ-old.gpuQueries, s.gpuH-old.gpuHits, s.extQ-old.extQueries, s.extH-old.extHits
		s.recent[s.next] = h
		s.next = (s.next + 1) % recentRequests
	}
	s.gpuQ, s.gpuH, s.extQ, s.extH = s.gpuQ+h.gpuQueries, s.gpuH+h.gpuHits, s.extQ+h.extQueries, s.extH+h.extHits
}

func rate(hits, queries int) float64 {
	if queries == 0 {
		return 0
	}
	return 100 * float64(hits) / float64(queries)
}

// logStats prints the stats line once per StatsInterval. Like vLLM, an
// interval with no throughput after one with none is not logged at INFO
// (the sim has no DEBUG), so an idle engine stays quiet; unlike vLLM it
// still logs while requests are queued, so a decoder whose requests all
// wait on a stalled peer's handshake says so.
func (e *Engine) logStats() {
	s := &e.stats
	if e.cfg.StatsInterval <= 0 {
		return
	}
	if s.last.IsZero() {
		s.last = e.now
		return
	}
	dt := e.now.Sub(s.last)
	if dt < e.cfg.StatsInterval {
		return
	}
	promptTp := float64(s.promptTokens) / dt.Seconds()
	genTp := float64(s.genTkns) / dt.Seconds()
	q, usedBlocks := e.queues()
	running, waiting := q.Running, q.Waiting
	if promptTp != 0 || genTp != 0 || s.lastPromptTp != 0 || s.lastGen != 0 || running+waiting > 0 {
		usage := 0.0
		if e.cfg.GPUBlocks > 0 {
			usage = min(100, 100*float64(usedBlocks)/float64(e.cfg.GPUBlocks))
		}
		line := "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, " +
			"Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
		args := []any{promptTp, genTp, running, waiting, usage, rate(s.gpuH, s.gpuQ)}
		if e.cfg.CPUBlocks > 0 || e.cfg.P2P {
			line += ", External prefix cache hit rate: %.1f%%"
			args = append(args, rate(s.extH, s.extQ))
		}
		e.log.Info(compLoggers, line, args...)
	}
	s.last = e.now
	s.lastPromptTp, s.lastGen = promptTp, genTp
	s.promptTokens, s.genTkns = 0, 0
}
