package sim

import (
	"math"
	"sync"
)

// balancer picks the data-parallel rank of a request sent without the
// X-data-parallel-rank header, as vLLM's internal load balancer does
// (vllm/v1/engine/core_client.py, DPLBAsyncMPClient.get_core_engine_for_request,
// read at vllm-project/vllm@00080ee1; one API server, so client_count is 1):
//
//   - each rank's load is max(in flight, waiting + running): the front end's
//     own unfinished requests on that rank (exact) against the core's last
//     reported queues (vLLM's coordinator publishes them every 100 ms; the
//     sim's core reports them after every step that changed them and again
//     every queuesRepublish);
//   - the least loaded rank wins; ties go to the first in the scan, which
//     starts one rank further on each pick, so an idle engine's requests go
//     round-robin;
//   - the winner's waiting count is raised by one until the next report, so
//     picks between two reports spread.
//
// vLLM adds waiting × 6 × (KV cache usage − 0.5) when usage is over half;
// the sim's GPU cache is sized never to fill (gpuBlocksPerUtil), so that
// term is always 0 and is left out.
type balancer struct {
	mu    sync.Mutex
	start int // eng_start_index
}

func (b *balancer) pick(cores []*coreLink) *coreLink {
	if len(cores) == 1 {
		return cores[0]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(cores)
	best, bestLoad := 0, math.MaxInt
	for i := range n {
		idx := (b.start + i) % n
		if l := cores[idx].load(); l < bestLoad {
			best, bestLoad = idx, l
		}
	}
	cores[best].mu.Lock()
	cores[best].lbLoad.Waiting++
	cores[best].mu.Unlock()
	b.start = (b.start + 1) % n
	return cores[best]
}

// load is the balancer's score of one rank.
func (c *coreLink) load() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(len(c.pending), c.lbLoad.Waiting+c.lbLoad.Running)
}
