package engine

import (
	"fmt"
	"time"

	"p2pfault/sim/kv"
	"p2pfault/sim/wire"
)

// staleRoute is a route that existed when the process froze: the first
// connect from its identity on another connection is routed to it and lost,
// like a reconnecting peer's first message in vLLM's ZMQ router.
type staleRoute struct {
	c     *conn
	until time.Time // the router would have swept it by then (heartbeat)
}

// heldLookup is a lookup waiting on blocks still being computed here
// (vLLM's HIT_PENDING), answered when they are stored or at its deadline.
type heldLookup struct {
	c        *conn
	id       string
	keys     []uint64
	deadline time.Time
}

// transfer is a fetch being written to the consumer.
type transfer struct {
	c       *conn
	id      string
	keys    []uint64      // pinned by the transfer itself (a pull's fetch)
	refs    []kv.BlockRef // where the blocks are read from when the write ends
	at      time.Time
	success bool
	bytes   int64
	pd      *pdStore // a PD store's transfer: its blocks are the store's pins
}

type pinKey struct {
	conn uint64
	id   string
}

// pinSet are the blocks a lookup hit pinned until its fetch or expiry.
// An expired set is kept, unpinned, for as long again (lapsed): a late
// fetch on its connection is still a pull's, served by key if the blocks
// are held, and not taken for a PD decode leg's.
type pinSet struct {
	keys    []uint64
	refs    []kv.BlockRef // where the hits were held when pinned
	expires time.Time
	lapsed  bool
}

func (e *Engine) producerFrame(c *conn, m wire.Message) {
	switch m.Type {
	case wire.TypeConnect:
		e.onConnect(c, m)
	case wire.TypePing:
		e.send(c, wire.Message{Type: wire.TypePong})
	case wire.TypeDisconnect:
		if c.peerID != "" {
			e.log.Info(compP2P, "peer %s disconnected", c.peerID)
		}
		e.closeConn(c)
	case wire.TypeLookup, wire.TypeFetch, wire.TypeAbortFetch:
		if c.peerID == "" {
			e.log.Warning(compP2P, "%s from %s before its connect was acknowledged: ignored", m.Type, e.connName(c))
			return
		}
		switch m.Type {
		case wire.TypeLookup:
			h := &heldLookup{c: c, id: m.KVRequestID, keys: m.Keys, deadline: e.now.Add(e.cfg.LookupHold)}
			if !e.answerLookup(h, false) {
				e.held = append(e.held, h)
			}
		case wire.TypeFetch:
			e.onFetch(c, m)
		case wire.TypeAbortFetch:
			e.onAbortFetch(c, m)
		}
	}
}

func (e *Engine) onConnect(c *conn, m wire.Message) {
	if c.peerID != "" {
		return // no second connect on one connection
	}
	if reason := e.connectMismatch(m); reason != "" {
		e.protocolError(m.PeerID, reason)
		// vLLM's source disconnects after its own Connect went out; the
		// sim's producer sends no Connect of its own, so the reject carries
		// its fields, and the consumer checks them as vLLM's decoder checks
		// the source's Connect (consumerFrame).
		e.send(c, wire.Message{Type: wire.TypeConnectReject, Reason: reason,
			PeerID: e.id, Fingerprint: e.fingerprint, HashSeed: e.cfg.HashSeed, BlockLen: e.blockBytes})
		e.closeAfterFlush(c)
		return
	}
	if st, ok := e.stale[m.PeerID]; ok {
		delete(e.stale, m.PeerID)
		if st.c != c && e.now.Before(st.until) {
			e.log.Warning(compP2P, "connect from %s routed to a stale connection and dropped", m.PeerID)
			if e.routes[m.PeerID] == st.c {
				delete(e.routes, m.PeerID)
			}
			// No ack: the consumer's handshake runs to its deadline, and
			// its next session finds the route gone.
			return
		}
	}
	c.peerID = m.PeerID
	e.routes[m.PeerID] = c
	e.registerPeer()
	e.send(c, wire.Message{Type: wire.TypeConnectAck, PeerID: e.id})
	e.log.Info(compP2P, "accepted connect from %s", m.PeerID)
}

// connectMismatch is why a peer's connect fields (its connect, or the
// producer's reject) must be refused, or "": the checks of vLLM's
// session.py P2PSession._validate_connect_candidate, in its order and
// words (the sim's fingerprint holds the block size, so a --block-size
// that differs is a block_len mismatch first, as on vLLM).
func (e *Engine) connectMismatch(m wire.Message) string {
	switch {
	case m.BlockLen != e.blockBytes:
		return fmt.Sprintf("block_len mismatch from %s: remote=%d, local=%d", m.PeerID, m.BlockLen, e.blockBytes)
	case m.Fingerprint != e.fingerprint:
		return fmt.Sprintf("config fingerprint mismatch from %s: remote='%s', local='%s'", m.PeerID, m.Fingerprint, e.fingerprint)
	case m.HashSeed != e.cfg.HashSeed:
		return fmt.Sprintf("hash seed mismatch from %s: remote='%s', local='%s'. "+
			"Ensure PYTHONHASHSEED (if set) matches on all P2P peers.", m.PeerID, m.HashSeed, e.cfg.HashSeed)
	}
	return ""
}

// protocolError logs vLLM's line for a connect it refuses (session.py
// P2PSession._protocol_error on the ValueError of the validation:
// "P2PSession %s: protocol error: %s — disconnecting", the reason
// "malformed 'connect': ..."); p2pfault's package cause reads it.
func (e *Engine) protocolError(peer, reason string) {
	e.log.Error(compP2P, "P2PSession %s: protocol error: malformed '%s': %s — disconnecting", peer, wire.TypeConnect, reason)
}

// answerLookup answers h unless a block it would hit is still being
// computed here and force is false. Hits are a consecutive prefix and are
// pinned until the fetch.
func (e *Engine) answerLookup(h *heldLookup, force bool) bool {
	hits := make([]bool, len(h.keys))
	n := 0
	for i, k := range h.keys {
		if e.cpu.Contains(k) {
			hits[i] = true
			n++
			continue
		}
		if e.computing[k] > 0 && !force {
			return false
		}
		break
	}
	if n > 0 {
		refs := make([]kv.BlockRef, n)
		for i, k := range h.keys[:n] {
			e.cpu.Pin(k)
			refs[i], _ = e.cpu.Ref(k)
		}
		e.unpin(pinKey{h.c.id, h.id})
		// The pin is vLLM's store job of the hit (create_store_job), which
		// fails and releases its blocks after _STORE_TIMEOUT_S.
		e.pins[pinKey{h.c.id, h.id}] = &pinSet{keys: h.keys[:n], refs: refs, expires: e.now.Add(e.cfg.StoreTimeout)}
	}
	e.send(h.c, wire.Message{Type: wire.TypeLookupResp, KVRequestID: h.id, Hits: hits})
	return true
}

func (e *Engine) serveHeldLookups(force bool) {
	kept := e.held[:0]
	for _, h := range e.held {
		if h.c.closed {
			continue
		}
		if e.answerLookup(h, force || !e.now.Before(h.deadline)) {
			continue
		}
		kept = append(kept, h)
	}
	for i := len(kept); i < len(e.held); i++ {
		e.held[i] = nil
	}
	e.held = kept
}

func (e *Engine) onFetch(c *conn, m wire.Message) {
	key := pinKey{c.id, m.KVRequestID}
	p := e.pins[key]
	if p == nil && e.pdFetch(c, m) {
		return
	}
	if p != nil && p.lapsed && e.cfg.Defects.ReuseFreedBlocks && sameKeys(p.keys, m.Keys) {
		// The defect: the hit's record outlived the timeout that freed
		// its slots, and the fetch is served from them.
		e.log.Warning(compP2P, "defect reuse-freed-blocks: fetch %s served from the %d slots its lookup's pin freed", m.KVRequestID, len(p.refs))
		t := &transfer{c: c, id: m.KVRequestID, success: true, refs: p.refs, bytes: int64(len(p.refs)) * e.blockBytes}
		e.unpin(key)
		t.at = e.now.Add(e.cfg.transferTime(t.bytes))
		e.transfers = append(e.transfers, t)
		return
	}
	ok := true
	for _, k := range m.Keys {
		if !e.cpu.Contains(k) {
			ok = false
			break
		}
	}
	t := &transfer{c: c, id: m.KVRequestID, success: ok}
	if ok {
		// The transfer holds its own pins; the lookup's are released.
		t.refs = make([]kv.BlockRef, len(m.Keys))
		for i, k := range m.Keys {
			e.cpu.Pin(k)
			t.refs[i], _ = e.cpu.Ref(k)
		}
		t.keys = m.Keys
		t.bytes = int64(len(m.Keys)) * e.blockBytes
	}
	e.unpin(key)
	t.at = e.now.Add(e.cfg.transferTime(t.bytes))
	e.transfers = append(e.transfers, t)
}

func (e *Engine) onAbortFetch(c *conn, m wire.Message) {
	kept := e.transfers[:0]
	for _, t := range e.transfers {
		if t.c == c && t.id == m.KVRequestID {
			e.unpinKeys(t.keys)
			continue
		}
		kept = append(kept, t)
	}
	e.transfers = kept
	e.abortParked(c, m.KVRequestID)
	e.send(c, wire.Message{Type: wire.TypeAbortAck, KVRequestID: m.KVRequestID})
}

func (e *Engine) finishTransfers() {
	kept := e.transfers[:0]
	for _, t := range e.transfers {
		if t.c.closed {
			continue // dropProducerState unpinned it
		}
		if e.now.Before(t.at) {
			kept = append(kept, t)
			continue
		}
		data, ok := e.readBlocks(t.refs)
		e.unpinKeys(t.keys)
		if !t.success || !ok {
			data, t.bytes, t.success = nil, 0, false
		}
		e.send(t.c, wire.Message{Type: wire.TypeTransferDone, KVRequestID: t.id, Success: t.success, Bytes: t.bytes, Data: data})
		if t.pd != nil {
			e.releaseParked(t.pd)
		}
	}
	for i := len(kept); i < len(e.transfers); i++ {
		e.transfers[i] = nil
	}
	e.transfers = kept
}

func (e *Engine) expirePins() {
	for k, p := range e.pins {
		if e.now.Before(p.expires) {
			continue
		}
		if p.lapsed {
			delete(e.pins, k)
			continue
		}
		e.unpinKeys(p.keys)
		if e.cfg.Defects.ReuseFreedBlocks {
			e.freeSlots(p.keys)
		}
		p.lapsed = true
		p.expires = e.now.Add(e.cfg.StoreTimeout)
	}
}

// freeSlots is the reuse-freed-blocks defect's release on a timeout: the
// blocks nobody else pins leave the tier at once, their slots free for the
// next store, while the record that names those slots is kept.
func (e *Engine) freeSlots(keys []uint64) {
	for _, k := range keys {
		if !e.cpu.Pinned(k) {
			e.cpu.Remove(k)
		}
	}
}

// readBlocks reads what a transfer writes: the content of each block's
// slot. It reports false if a block is no longer in its slot — a correct
// source never serves such a block; the reuse-freed-blocks defect reads the
// slot anyway.
func (e *Engine) readBlocks(refs []kv.BlockRef) ([]uint64, bool) {
	if len(refs) == 0 {
		return nil, true
	}
	data := make([]uint64, len(refs))
	for i, r := range refs {
		d, intact := e.cpu.ReadSlot(r)
		if !intact && !e.cfg.Defects.ReuseFreedBlocks {
			return nil, false
		}
		data[i] = d
	}
	return data, true
}

func sameKeys(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (e *Engine) unpin(k pinKey) {
	if p := e.pins[k]; p != nil {
		if !p.lapsed {
			e.unpinKeys(p.keys)
		}
		delete(e.pins, k)
	}
}

func (e *Engine) unpinKeys(keys []uint64) {
	for _, k := range keys {
		e.cpu.Unpin(k)
	}
}

// dropProducerState forgets what a closed inbound connection held: its
// route, held lookups, pins and transfers.
func (e *Engine) dropProducerState(c *conn) {
	if c.peerID != "" && e.routes[c.peerID] == c {
		delete(e.routes, c.peerID)
	}
	for k := range e.pins {
		if k.conn == c.id {
			e.unpin(k)
		}
	}
	kept := e.transfers[:0]
	for _, t := range e.transfers {
		if t.c == c {
			e.unpinKeys(t.keys)
			continue
		}
		kept = append(kept, t)
	}
	e.transfers = kept
	e.dropParked(c)
}
