package engine

import (
	"sort"
	"time"

	"p2pfault/sim/kv"
	"p2pfault/sim/wire"
)

// PD mode (prefill/decode disaggregation), as vLLM's P2P tier runs it
// (vllm/v1/kv_offload/tiering/p2p/manager.py, session/server.py,
// session/client.py):
//
//   - The prefill leg (kv_transfer_params.remote_decoder {kv_request_id})
//     computes its prompt and parks every full block of it (REQUEST_LEVEL,
//     #52912) under the id, pinned in the CPU tier, until a fetch naming the
//     id binds them to the connection it came on (_unbound_stores,
//     _kv_to_session). A store no fetch binds within unbound_store_timeout_s
//     is reaped and the id failed; a later fetch for it is refused in one
//     round trip (#53453).
//   - The decode leg (remote_prefiller {kv_request_id, remote_host,
//     remote_port}) answers its lookup HIT at once with no probe, opens or
//     reuses the session with the prefiller and sends the fetch, queued
//     until the session's connect_ack. Its load timeout runs from then.
//   - Decoder-first: a fetch for an id nothing is parked under yet records
//     its demand (ServerRole.on_fetch) and binds the id; the prefill's
//     store then meets the demand and is sent at once (add_stored_blocks).
//   - When the prefill leg ends with the id bound and the demand not met,
//     no more blocks will come: the fetch is answered transfer_done failed
//     (ServerRole.finish). If it ends before any fetch bound the id, that is
//     a no-op: the parked store waits for its fetch or its reap.

// pdStore is one kv_request_id's PD state on the producer: its parked
// blocks and, once a fetch has named the id, the connection it is bound to
// and the blocks that fetch asked for.
type pdStore struct {
	id       string
	keys     []uint64      // stored blocks, each pinned once in the CPU tier
	refs     []kv.BlockRef // where each of keys was held when parked
	freed    bool          // the reuse-freed-blocks defect freed their slots on a timeout
	parkedAt time.Time     // the first store: the unbound timer runs from it
	c        *conn         // bound: the connection of the fetch; nil while unbound
	demand   []uint64      // bound: the blocks the fetch asked for
	round    int64         // bound: the fetch's round_seq
	boundAt  time.Time     // bound and stored: the store job's timer runs from it
	sending  bool          // the transfer is in flight
}

// startPDLoad is the decode leg's lookup and submit_load: every block the
// local tiers lack is a hit, fetched from the prefiller on its session
// (opened now if there is none, as on_new_request does).
func (e *Engine) startPDLoad(r *request) {
	src := r.in.Source
	r.wireID = src.KVRequestID
	s := e.sessions[src.ID()]
	if s == nil {
		s = e.openSession(src)
	}
	if s.loads[r.wireID] != nil {
		// A second fetch for one id would be a protocol error on the
		// prefiller (server.py: duplicate fetch) and cost every load of
		// the session; fail this one alone.
		r.sess = nil
		r.fetched = 0
		e.loadFailed(r, "kv_request_id "+r.wireID+" is already loading on this session")
		return
	}
	r.sess = s
	r.state = rsLoad
	r.fetched = r.maxHit - r.localHit()
	e.reserveLoad(r, r.hashes[r.localHit():r.maxHit])
	r.deadline = e.now.Add(e.cfg.LoadTimeout)
	s.loads[r.wireID] = r
	e.sessionSend(s, fetchMsg(r.wireID, r.hashes[r.localHit():r.maxHit]))
}

// park is the prefill leg's submit_store: its blocks (those the CPU tier
// holds) are pinned under id, and served at once if a fetch already bound
// the id (decoder-first).
func (e *Engine) park(id string, keys []uint64) {
	if _, ok := e.reaped[id]; ok {
		// #53453: a store under a reaped id would only be reaped again.
		e.log.Warning(compP2P, "store for kv_request_id=%s not parked: the id was already reaped", id)
		return
	}
	st := e.parked[id]
	if st == nil {
		st = &pdStore{id: id, parkedAt: e.now}
		e.parked[id] = st
	}
	for _, k := range keys {
		if containsKey(st.keys, k) || !e.cpu.Pin(k) {
			continue // a block the CPU tier skipped (all pinned) cannot be parked
		}
		ref, _ := e.cpu.Ref(k)
		st.keys = append(st.keys, k)
		st.refs = append(st.refs, ref)
	}
	if st.c != nil {
		if st.boundAt.IsZero() && len(st.keys) > 0 {
			st.boundAt = e.now
		}
		e.serveParked(st, false)
	}
}

// pdFetch handles a fetch no lookup of this connection preceded: a PD
// decode leg's. It reports false when the fetch is not one (no store is
// parked under the id and every block is held here: served as a pull).
func (e *Engine) pdFetch(c *conn, m wire.Message, hashes []uint64) bool {
	if _, ok := e.reaped[m.KVRequestID]; ok {
		e.log.Warning(compP2P, "fetch for kv_request_id=%s from %s refused: its parked store was reaped", m.KVRequestID, e.connName(c))
		e.serverSend(c, wire.Message{Type: wire.TypeTransferDone, KVRequestID: m.KVRequestID, RoundSeq: m.RoundSeq, Success: false})
		return true
	}
	st := e.parked[m.KVRequestID]
	if st == nil {
		if e.allHeld(hashes) {
			return false
		}
		st = &pdStore{id: m.KVRequestID}
		e.parked[m.KVRequestID] = st
	}
	if st.c != nil {
		// server.py raises on a duplicate fetch: a protocol error that
		// disconnects the peer.
		e.log.Error(compP2P, "protocol error from %s: duplicate fetch for kv_request_id=%s — disconnecting", e.connName(c), m.KVRequestID)
		e.send(c, wire.Message{Type: wire.TypeDisconnect})
		e.closeAfterFlush(c)
		return true
	}
	st.c = c
	st.round = m.RoundSeq
	st.demand = hashes
	if len(st.keys) > 0 {
		st.boundAt = e.now
	}
	e.serveParked(st, false)
	return true
}

func (e *Engine) allHeld(keys []uint64) bool {
	for _, k := range keys {
		if !e.cpu.Contains(k) {
			return false
		}
	}
	return len(keys) > 0
}

// serveParked sends a bound store once it holds every block its fetch
// asked for. finished says the prefill leg has ended: no more blocks will
// come, so a demand still unmet is answered failed.
func (e *Engine) serveParked(st *pdStore, finished bool) {
	if st.c == nil || st.sending {
		return
	}
	for _, k := range st.demand {
		if !containsKey(st.keys, k) {
			if finished {
				e.log.Warning(compP2P, "kv_request_id=%s: prefill finished without the %d blocks %s asked for", st.id, len(st.demand), e.connName(st.c))
				e.serverSend(st.c, wire.Message{Type: wire.TypeTransferDone, KVRequestID: st.id, RoundSeq: st.round, Success: false})
				e.releaseParked(st)
			}
			return
		}
	}
	st.sending = true
	refs := make([]kv.BlockRef, len(st.demand))
	for i, k := range st.demand {
		for j, sk := range st.keys {
			if sk == k {
				refs[i] = st.refs[j]
				break
			}
		}
	}
	bytes := int64(len(st.demand)) * e.blockBytes
	e.transfers = append(e.transfers, &transfer{c: st.c, id: st.id, round: st.round, success: true, bytes: bytes, refs: refs,
		at: e.now.Add(e.cfg.transferTime(bytes)), pd: st})
}

// producerLegEnded is on_request_finished on the producer: a prefill leg
// whose id a fetch has bound ends its serving (ServerRole.finish); before
// any fetch it changes nothing.
func (e *Engine) producerLegEnded(r *request) {
	if r.in.RemoteDecoder == "" {
		return
	}
	if st := e.parked[r.in.RemoteDecoder]; st != nil && st.c != nil {
		e.serveParked(st, true)
	}
}

// releaseParked forgets st and unpins its blocks.
func (e *Engine) releaseParked(st *pdStore) {
	if e.parked[st.id] == st {
		delete(e.parked, st.id)
	}
	if !st.freed {
		e.unpinKeys(st.keys)
	}
	st.keys, st.refs = nil, nil
}

// expireStores reaps the parked stores no fetch bound in the unbound-store
// timeout (manager.py _reap_unbound_stores) and fails the bound ones not
// sent in the store timeout (server.py _timeout_pending_store_jobs), in id
// order so that equal deadlines log the same way every run.
func (e *Engine) expireStores() {
	for id, until := range e.reaped {
		if !e.now.Before(until) {
			delete(e.reaped, id)
		}
	}
	if len(e.parked) == 0 {
		return
	}
	var due []*pdStore
	for _, st := range e.parked {
		switch {
		case st.freed:
			// Forgotten once a fetch could no longer be expected either.
			if st.c == nil && !e.now.Before(st.parkedAt.Add(2*e.cfg.UnboundStoreTimeout)) {
				e.releaseParked(st)
			}
		case st.c == nil && len(st.keys) > 0 && !e.cfg.Defects.LeakUnboundStores && !e.now.Before(st.parkedAt.Add(e.cfg.UnboundStoreTimeout)):
			due = append(due, st)
		case st.c != nil && !st.sending && !st.boundAt.IsZero() && !e.now.Before(st.boundAt.Add(e.cfg.StoreTimeout)):
			due = append(due, st)
		}
	}
	if len(due) > 1 {
		sort.Slice(due, func(i, j int) bool { return due[i].id < due[j].id })
	}
	for _, st := range due {
		if e.cfg.Defects.ReuseFreedBlocks {
			// The defect: the timeout frees the slots, but the store stays
			// parked (its id not failed), to be served from them.
			e.log.Warning(compP2P, "defect reuse-freed-blocks: store kv_request_id=%s freed its %d slots on its timeout and stays parked", st.id, len(st.keys))
			e.unpinKeys(st.keys)
			e.freeSlots(st.keys)
			st.freed = true
			continue
		}
		if st.c == nil {
			// manager.py _reap_unbound_stores's line (blocks where it counts jobs).
			e.log.Warning(compP2P, "P2P %s: unbound store kv_request_id=%s timed out after %s without a fetch — failing %d block(s)", e.id, st.id, secs(e.cfg.UnboundStoreTimeout), len(st.keys))
			e.releaseParked(st)
			// Remembered for as long again: a late fetch is refused, a late
			// store not parked (#53453's time-pruned _reaped_stores).
			e.reaped[st.id] = e.now.Add(e.cfg.UnboundStoreTimeout)
			continue
		}
		// The store job fails and its blocks are released; the demand stays
		// bound, so the consumer's load runs to its own timeout and abort.
		e.log.Warning(compP2P, "store job for kv_request_id=%s timed out after %s", st.id, secs(e.cfg.StoreTimeout))
		e.unpinKeys(st.keys)
		st.keys, st.refs = nil, nil
		st.boundAt = time.Time{}
	}
}

// dropParked unbinds what a closed connection had bound: the session is
// reaped, its store jobs fail and their blocks are released; a prefill
// still running parks its later store unbound again (manager.py
// _reap_dead_sessions purges _kv_to_session).
func (e *Engine) dropParked(c *conn) {
	for _, st := range e.parked {
		if st.c == c {
			e.releaseParked(st)
		}
	}
}

// abortParked ends what abort_fetch names (server.py _drain_abort).
func (e *Engine) abortParked(c *conn, id string) {
	if st := e.parked[id]; st != nil && st.c == c {
		e.releaseParked(st)
	}
}

func containsKey(keys []uint64, k uint64) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
