package engine

import (
	"fmt"
	"strconv"
	"time"

	"p2pfault/sim/kv"
	"p2pfault/sim/wire"
)

// Request is one completion as the engine core sees it: tokens already
// produced by the front end's tokenizer.
type Request struct {
	Tokens    []int32
	CacheSalt string
	MaxTokens int
	Source    *RemoteSource // kv_transfer_params.remote_kv_source or remote_prefiller, if any
	// RemoteDecoder is kv_transfer_params.remote_decoder.kv_request_id: the
	// PD producer leg, whose blocks are parked for the decoder that will
	// fetch them under this id (pd.go).
	RemoteDecoder string
	Hooks         *Hooks // streaming and abort callbacks, if any (stream.go)
}

// RemoteSource names the peer to pull KV blocks from.
type RemoteSource struct {
	KVRequestID string
	Host        string
	Port        int
	// Prefiller marks kv_transfer_params.remote_prefiller (PD mode): the
	// lookup hits at once with no probe, and the fetch names the prefill's
	// own kv_request_id (vLLM's P2PSourceInfo.do_probe false).
	Prefiller bool
}

// ID is the peer's identity: the literal "host:port", as vLLM matches it.
func (s RemoteSource) ID() string { return s.Host + ":" + strconv.Itoa(s.Port) }

// Result is what a finished request reports to the front end.
type Result struct {
	CachedTokens int
	// KV is the digest of the KV the decode read (kv.DecodeDigest): the
	// blocks the request held — computed here or loaded from a peer — and
	// the tokens after them. The generated tokens are a function of it, so
	// a correct load gives the same as a local prefill.
	KV    uint64
	Stats Stats
	Err   error // a failed load under kv_load_failure_policy "fail", or shutdown
}

// Stats are the request's contribution to the engine's counters.
type Stats struct {
	PromptTokens        int
	GPUQueryTokens      int // vllm:prefix_cache_queries
	GPUHitTokens        int // vllm:prefix_cache_hits
	ExternalQueryTokens int // vllm:external_prefix_cache_queries: asked of the connector
	ExternalHitTokens   int // vllm:external_prefix_cache_hits: own CPU tier + P2P
	CPUReadBytes        int64
	P2PReadBytes        int64
	// The offload lookup's delays (vllm:kv_offload_lookup_sync_delay_seconds
	// and _async_delay_seconds): LookupSync is the time spent in the lookup
	// calls themselves (the CPU tier's and the P2P tier's, measured on the
	// machine's clock), LookupAsync the time from the lookup's first RETRY
	// to its HIT or MISS, or to the request's end, if it was deferred
	// (LookupDeferred).
	LookupSync     time.Duration
	LookupAsync    time.Duration
	LookupDeferred bool
}

// LoadError is a fetch from a peer that failed after its lookup hit.
type LoadError struct {
	Peer        string
	KVRequestID string
	Reason      string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("KV load for %s from peer %s failed: %s", e.KVRequestID, e.Peer, e.Reason)
}

type reqState int

const (
	rsNew         reqState = iota
	rsWaitSession          // the named peer's session is not ready yet (wait mode)
	rsLookup               // lookup sent, waiting for lookup_resp
	rsLoad                 // fetch sent, waiting for transfer_done
	rsAbort                // load timed out, abort_fetch sent, waiting for abort_ack
	rsPrefill
	rsDecode
	rsDone
)

type request struct {
	id        uint64
	in        Request
	done      func(Result)
	cancelled bool

	state   reqState
	hashes  []uint64 // full prompt blocks
	digests []uint64 // their content, as computing them here gives
	held    []uint64 // the content the request holds for each block: hit, loaded or computed
	// reserved counts the CPU-tier destinations of the load in flight: the
	// blocks hashes[resFrom:resFrom+reserved] (kv.LRU.Reserve).
	reserved, resFrom int
	maxHit            int // blocks that may come from a cache
	gpuHit            int
	cpuHit            int
	peerHit           int
	fetched           int // blocks asked for in the fetch
	stats             Stats

	sess     *session
	wireID   string    // kv_request_id on the wire
	deadline time.Time // of the lookup, load or abort in flight
	wakeAt   time.Time // end of decode
	// The prefill's progress: tokens to compute, computed, and scheduled in
	// the batch executing (sched.go). admitted: it has been scheduled, so
	// it is in vLLM's running queue, no longer waiting.
	toCompute, computed, sched int
	admitted                   bool
	storing                    []uint64 // its blocks counted in e.computing until stored
	// deferredAt is when its lookup first returned RETRY (a session not
	// ready, a lookup sent), until the lookup resolves (lookupResolved).
	deferredAt time.Time
	stream     *streamState
	kv         uint64 // kv.DecodeDigest of what the decode reads, set when it starts
}

func (r *request) localHit() int { return r.gpuHit + r.cpuHit }

func (e *Engine) admit(ev evSubmit) {
	if e.byID[ev.id] != nil {
		ev.done(Result{Err: fmt.Errorf("submit request %d: %w", ev.id, ErrDuplicateID)})
		return
	}
	r := &request{id: ev.id, in: ev.req, done: ev.done}
	e.byID[r.id] = r
	e.active = append(e.active, r)
}

// advanceRequests moves every request as far as it can go this step, in
// submission order.
func (e *Engine) advanceRequests() {
	live := e.active[:0]
	for _, r := range e.active {
		e.advance(r)
		if r.state == rsDone {
			delete(e.byID, r.id)
			continue
		}
		live = append(live, r)
	}
	for i := len(live); i < len(e.active); i++ {
		e.active[i] = nil
	}
	e.active = live
}

func (e *Engine) advance(r *request) {
	for {
		before := r.state
		switch r.state {
		case rsNew:
			if r.cancelled {
				e.drop(r)
				return
			}
			e.lookupLocal(r)
		case rsWaitSession:
			if r.cancelled {
				e.drop(r)
				return
			}
			t := time.Now()
			e.pollSession(r)
			r.stats.LookupSync += time.Since(t)
		case rsPrefill:
			if r.cancelled {
				e.drop(r)
				return
			}
			if r.computed < r.toCompute {
				return // its chunks come step by step (schedule)
			}
			e.storeBlocks(r)
			r.state = rsDecode
			// The step that computed the prompt's last chunk sampled its
			// first token (vLLM's scheduler samples at the end of a
			// prefill); each further token takes a decode step.
			r.wakeAt = e.now.Add(time.Duration(max(r.in.MaxTokens-1, 0)) * e.cfg.DecodePerToken)
			r.kv = kv.DecodeDigest(r.held, r.in.Tokens[len(r.held)*e.cfg.BlockSize:])
			if h := r.in.Hooks; h != nil && h.Decoding != nil {
				h.Decoding(r.kv)
			}
		case rsDecode:
			if r.cancelled {
				e.drop(r)
				return
			}
			e.emitTokens(r)
			if e.now.Before(r.wakeAt) {
				return
			}
			e.finish(r, Result{CachedTokens: (r.localHit() + r.peerHit) * e.cfg.BlockSize, KV: r.kv, Stats: r.stats})
		case rsLookup:
			if r.cancelled {
				e.cancelLookup(r)
				return
			}
		}
		// Otherwise rsLookup, rsLoad and rsAbort move on frames and deadlines.
		if r.state == before || r.state == rsDone {
			return
		}
	}
}

// lookupLocal checks the engine's own tiers: GPU prefix cache, then the CPU
// tier for the blocks after the GPU hits. What is left may be asked of the
// named peer.
func (e *Engine) lookupLocal(r *request) {
	bs := e.cfg.BlockSize
	n := len(r.in.Tokens)
	r.hashes = kv.BlockHashes(e.cfg.HashSeed, r.in.CacheSalt, r.in.Tokens, bs)
	r.digests = kv.BlockDigests(r.in.Tokens, bs)
	r.held = make([]uint64, len(r.digests))
	r.maxHit = kv.MaxHitBlocks(n, bs)
	cand := r.hashes[:r.maxHit]
	r.gpuHit = e.gpu.PrefixHits(cand)
	t := time.Now()
	r.cpuHit = e.cpu.PrefixHits(cand[r.gpuHit:])
	cpuLookup := time.Since(t)
	for i, h := range cand[:r.gpuHit] {
		r.held[i], _ = e.gpu.Digest(h)
	}
	for i, h := range cand[r.gpuHit:r.localHit()] {
		d, _ := e.cpu.Digest(h)
		r.held[r.gpuHit+i] = d
		e.gpu.Insert(h, d) // a CPU hit is promoted to the GPU
	}
	r.stats = Stats{
		PromptTokens:        n,
		GPUQueryTokens:      n,
		GPUHitTokens:        r.gpuHit * bs,
		ExternalQueryTokens: n - r.gpuHit*bs,
		ExternalHitTokens:   r.cpuHit * bs,
		CPUReadBytes:        int64(r.cpuHit) * e.blockBytes,
		LookupSync:          cpuLookup,
	}
	if r.in.Source == nil || !e.cfg.P2P || r.localHit() == r.maxHit {
		e.startCompute(r)
		return
	}
	if r.in.Source.Prefiller {
		e.startPDLoad(r)
		return
	}
	r.wireID = r.in.Source.KVRequestID + "#" + strconv.FormatUint(r.id, 10)
	r.state = rsWaitSession
}

// pollSession is vLLM's lookup() on the peer: no session → open one; a
// pending one → RETRY (wait) or MISS (prefill); a ready one → send lookup.
func (e *Engine) pollSession(r *request) {
	src := r.in.Source
	s := e.sessions[src.ID()]
	if s == nil {
		s = e.openSession(src)
	}
	switch s.state {
	case sessDialing, sessPending:
		if e.cfg.PendingHandshake == PendingPrefill {
			e.miss(r)
			return
		}
		if r.sess != s {
			r.sess = s
			s.waiters = append(s.waiters, r)
		}
		e.lookupDeferred(r)
	case sessReady:
		r.sess = s
		r.state = rsLookup
		e.lookupDeferred(r)
		r.deadline = e.now.Add(e.cfg.LookupTimeout)
		s.lookups[r.wireID] = r
		e.send(s.c, wire.Message{Type: wire.TypeLookup, KVRequestID: r.wireID, Keys: wire.KeysOf(r.hashes[r.localHit():r.maxHit])})
	case sessDead:
		// killSession removes dead sessions from the map; never reached.
		e.miss(r)
	}
}

// lookupDeferred: the lookup returned RETRY; the delay runs from the first.
func (e *Engine) lookupDeferred(r *request) {
	if r.deferredAt.IsZero() && !r.stats.LookupDeferred {
		r.deferredAt = e.now
	}
}

// lookupResolved: the deferred lookup answered HIT or MISS, or its request
// ended; its async delay is counted once.
func (e *Engine) lookupResolved(r *request) {
	if r.deferredAt.IsZero() {
		return
	}
	r.stats.LookupAsync = e.now.Sub(r.deferredAt)
	r.stats.LookupDeferred = true
	r.deferredAt = time.Time{}
}

// miss ends the peer phase with no blocks from the peer.
func (e *Engine) miss(r *request) {
	e.lookupResolved(r)
	r.sess = nil
	if r.cancelled {
		e.drop(r)
		return
	}
	e.startCompute(r)
}

// loaded lands n pulled blocks, holding data (one digest per block, what
// the transfer wrote), in the CPU tier and GPU cache.
func (e *Engine) loaded(r *request, n int, bytes int64, data []uint64) {
	r.sess = nil
	from := r.localHit()
	if len(data) != n {
		e.log.Error(compP2P, "KV load for %s: %d blocks fetched, %d written: failing it", r.in.Source.KVRequestID, n, len(data))
		e.loadFailed(r, "transfer wrote "+strconv.Itoa(len(data))+" of "+strconv.Itoa(n)+" blocks")
		return
	}
	for i, h := range r.hashes[from : from+n] {
		e.cpu.Fill(h, data[i]) // the reserved destination, if there is one
		e.cpu.Insert(h, data[i])
		e.gpu.Insert(h, data[i])
		r.held[from+i] = data[i]
	}
	r.reserved = 0
	r.peerHit = n
	r.stats.ExternalHitTokens += n * e.cfg.BlockSize
	r.stats.P2PReadBytes += bytes
	if r.cancelled {
		e.drop(r)
		return
	}
	e.startCompute(r)
}

// loadFailed follows kv_load_failure_policy.
func (e *Engine) loadFailed(r *request, reason string) {
	r.sess = nil
	peer := r.in.Source.ID()
	if r.cancelled {
		e.drop(r)
		return
	}
	if e.cfg.LoadFailure == PolicyRecompute {
		e.log.Warning(compP2P, "KV load for %s from %s failed (%s): recomputing locally", r.in.Source.KVRequestID, peer, reason)
		if e.cfg.Defects.RecomputeKeepsPartial {
			e.keepReserved(r)
		}
		e.releaseReserved(r)
		e.startCompute(r)
		return
	}
	e.log.Error(compP2P, "KV load for %s from %s failed (%s): failing the request", r.in.Source.KVRequestID, peer, reason)
	e.finish(r, Result{Err: &LoadError{Peer: peer, KVRequestID: r.in.Source.KVRequestID, Reason: reason}})
}

// startCompute starts the prefill of the tokens no cache provided. Its
// blocks are "being computed" until it ends, so a peer's lookup on them is
// held rather than missed.
func (e *Engine) startCompute(r *request) {
	e.releaseReserved(r)
	for i := r.localHit() + r.peerHit; i < len(r.held); i++ {
		r.held[i] = r.digests[i]
	}
	cached := (r.localHit() + r.peerHit) * e.cfg.BlockSize
	r.state = rsPrefill
	r.toCompute, r.computed = len(r.in.Tokens)-cached, 0
	for _, h := range r.hashes {
		if !e.cpu.Contains(h) {
			e.computing[h]++
			r.storing = append(r.storing, h)
		}
	}
}

// storeBlocks offloads the request's full prompt blocks (vLLM's
// offload_prompt_only) to the CPU tier and keeps them in the GPU cache.
func (e *Engine) storeBlocks(r *request) {
	e.releaseComputing(r)
	for i, h := range r.hashes {
		e.gpu.Insert(h, r.held[i])
		e.cpu.Insert(h, r.held[i])
	}
	if r.in.RemoteDecoder != "" && e.cfg.P2P {
		e.park(r.in.RemoteDecoder, r.hashes)
	}
}

func (e *Engine) releaseComputing(r *request) {
	for _, h := range r.storing {
		if n := e.computing[h]; n <= 1 {
			delete(e.computing, h)
		} else {
			e.computing[h] = n - 1
		}
	}
	r.storing = nil
}

func (e *Engine) finish(r *request, res Result) {
	e.releaseComputing(r)
	e.releaseReserved(r)
	e.producerLegEnded(r)
	if res.Err == nil {
		e.stats.record(r.stats, true, r.in.MaxTokens)
	} else {
		e.stats.record(r.stats, false, 0)
	}
	r.state = rsDone
	if !r.cancelled && r.done != nil {
		r.done(res)
	}
}

func (e *Engine) drop(r *request) {
	e.lookupResolved(r)
	e.releaseComputing(r)
	e.releaseReserved(r)
	e.producerLegEnded(r)
	r.state = rsDone
	e.aborted(r)
}

// reserveLoad places the load's destinations (the blocks from localHit on)
// in the CPU tier, as vLLM allocates them with submit_load: pinned, not
// hits, their slots written when the transfer lands.
func (e *Engine) reserveLoad(r *request, keys []uint64) {
	r.resFrom, r.reserved = r.localHit(), 0
	for _, k := range keys {
		if !e.cpu.Reserve(k) {
			break // held meanwhile, or no slot: the load still lands (Insert)
		}
		r.reserved++
	}
}

// releaseReserved frees the destinations of a load that did not land.
func (e *Engine) releaseReserved(r *request) {
	for _, k := range r.hashes[r.resFrom : r.resFrom+r.reserved] {
		e.cpu.Cancel(k)
	}
	r.reserved = 0
}

// keepReserved is the recompute-keeps-partial defect: the failed load's
// destinations become hits with whatever their slots hold, and the
// recompute starts after them.
func (e *Engine) keepReserved(r *request) {
	n := r.reserved
	for i, k := range r.hashes[r.resFrom : r.resFrom+n] {
		e.cpu.Keep(k)
		d, _ := e.cpu.Digest(k)
		r.held[r.resFrom+i] = d
		e.gpu.Insert(k, d)
	}
	if n > 0 {
		e.log.Warning(compP2P, "defect recompute-keeps-partial: KV load for %s kept %d blocks it never received", r.in.Source.KVRequestID, n)
		r.cpuHit += n
		r.stats.ExternalHitTokens += n * e.cfg.BlockSize
	}
	r.reserved = 0
}
