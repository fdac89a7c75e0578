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
	keys     []uint64   // the sim's hashes of raw
	raw      []wire.Key // as they came: the answer echoes them
	deadline time.Time
}

// transfer is a fetch being written to the consumer.
type transfer struct {
	c       *conn
	id      string
	round   int64         // the fetch's round_seq, echoed on transfer_done
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
	case wire.TypeConnectAck:
		if c.peerID != "" && !c.acked {
			c.acked = true
			for _, q := range c.held {
				e.send(c, q)
			}
			c.held = nil
		}
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
			h := &heldLookup{c: c, id: m.KVRequestID, keys: wire.Hashes(m.Keys), raw: m.Keys, deadline: e.now.Add(e.cfg.LookupHold)}
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

// onConnect is a consumer's connect: the source's session announces
// itself with its own connect first (session.py attach_connection), then
// validates the peer's; a mismatch is logged and answered with nothing
// (the consumer, checking this side's connect, rejects it in turn), and a
// connect after the handshake is a protocol error that disconnects.
func (e *Engine) onConnect(c *conn, m wire.Message) {
	// The stale route first: the peer's session that froze with this
	// process may still be held here, and the reconnect's connect is
	// lost into it, whichever of its end and the connect comes first.
	if e.consumeStale(m.PeerID) {
		return
	}
	if c.peerID != "" {
		if c.acked {
			e.log.Error(compP2P, "P2PSession %s: protocol error: duplicate connect after handshake — disconnecting", c.peerID)
			e.send(c, wire.Message{Type: wire.TypeDisconnect})
			e.closeAfterFlush(c)
		}
		return
	}
	e.send(c, e.connectMsg())
	if reason := e.connectMismatch(m, m.PeerID); reason != "" {
		e.rejectConnect(m.PeerID, reason)
		e.closeAfterFlush(c)
		return
	}
	c.peerID = m.PeerID
	e.routes[m.PeerID] = c
	e.registerPeer()
	e.send(c, wire.Message{Type: wire.TypeConnectAck, PeerID: e.id})
	e.log.Info(compP2P, "accepted connect from %s", m.PeerID)
}

// consumeStale reports whether a connect from peer is lost into a route
// the process held when it froze (reference §3): nothing answers it, the
// consumer's handshake runs to its deadline, and its next session finds
// the route gone. Only the first connect after the resume is lost.
func (e *Engine) consumeStale(peer string) bool {
	st, ok := e.stale[peer]
	if !ok {
		return false
	}
	delete(e.stale, peer)
	if !e.now.Before(st.until) {
		return false
	}
	e.log.Warning(compP2P, "connect from %s routed to a stale connection and dropped", peer)
	// The dead session is swept with it: the peer's next connect meets
	// a new one.
	if !st.c.closed {
		e.closeConn(st.c)
	}
	return true
}

// agentMetadata is the connect's agent_metadata: where a peer finds this
// engine's KV blocks. vLLM's is NIXL's; the sim's data plane is its own,
// the blocks' content carried on transfer_done (fields bytes and data).
var agentMetadata = []byte("p2pfault-sim data-plane=inline:transfer_done")

// connectMsg is this engine's connect (session.py _send_connect).
func (e *Engine) connectMsg() wire.Message {
	return wire.Message{
		Type:          wire.TypeConnect,
		PeerID:        e.id,
		AgentMetadata: agentMetadata,
		NumBlocks:     int64(max(e.cfg.CPUBlocks, 1)),
		BlockLen:      e.blockBytes,
		Fingerprint:   e.fingerprint,
		HashSeed:      e.cfg.HashSeed,
	}
}

// connectMismatch is why a peer's connect must be refused, or "": the
// checks of vLLM's session.py P2PSession._on_connect (@0577fc22), in its
// order and words (the sim's fingerprint holds the block size, so a
// --block-size that differs is a block_len mismatch first, as on vLLM;
// an empty fingerprint is compatible with any).
func (e *Engine) connectMismatch(m wire.Message, peer string) string {
	switch {
	case m.BlockLen != e.blockBytes:
		return fmt.Sprintf("block_len mismatch from %s: remote=%d, local=%d", peer, m.BlockLen, e.blockBytes)
	case m.Fingerprint != "" && e.fingerprint != "" && m.Fingerprint != e.fingerprint:
		return fmt.Sprintf("config fingerprint mismatch from %s: remote='%s', local='%s'", peer, m.Fingerprint, e.fingerprint)
	case m.HashSeed != e.cfg.HashSeed:
		return fmt.Sprintf("hash seed mismatch from %s: remote='%s', local='%s'. "+
			"Ensure PYTHONHASHSEED (if set) matches on all P2P peers.", peer, m.HashSeed, e.cfg.HashSeed)
	}
	return ""
}

// rejectConnect logs vLLM's line for a connect it refuses (session.py
// P2PSession._on_connect: "P2PSession %s: rejecting peer connect: %s");
// p2pfault's package cause reads it.
func (e *Engine) rejectConnect(peer, reason string) {
	e.log.Error(compP2P, "P2PSession %s: rejecting peer connect: %s", peer, reason)
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
	e.serverSend(h.c, wire.Message{Type: wire.TypeLookupResp, KVRequestID: h.id, Keys: h.raw, Hits: hits})
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
	if len(m.Keys) == 0 {
		// The empty fetch ends the lookup phase: what it pinned is
		// released and nothing is sent (no transfer_done).
		e.unpin(key)
		return
	}
	hashes := wire.Hashes(m.Keys)
	p := e.pins[key]
	if p == nil && e.pdFetch(c, m, hashes) {
		return
	}
	if p != nil && p.lapsed && e.cfg.Defects.ReuseFreedBlocks && sameKeys(p.keys, hashes) {
		// The defect: the hit's record outlived the timeout that freed
		// its slots, and the fetch is served from them.
		e.log.Warning(compP2P, "defect reuse-freed-blocks: fetch %s served from the %d slots its lookup's pin freed", m.KVRequestID, len(p.refs))
		t := &transfer{c: c, id: m.KVRequestID, round: m.RoundSeq, success: true, refs: p.refs, bytes: int64(len(p.refs)) * e.blockBytes}
		e.unpin(key)
		t.at = e.now.Add(e.cfg.transferTime(t.bytes))
		e.transfers = append(e.transfers, t)
		return
	}
	ok := true
	for _, k := range hashes {
		if !e.cpu.Contains(k) {
			ok = false
			break
		}
	}
	t := &transfer{c: c, id: m.KVRequestID, round: m.RoundSeq, success: ok}
	if ok {
		// The transfer holds its own pins; the lookup's are released.
		t.refs = make([]kv.BlockRef, len(hashes))
		for i, k := range hashes {
			e.cpu.Pin(k)
			t.refs[i], _ = e.cpu.Ref(k)
		}
		t.keys = hashes
		t.bytes = int64(len(hashes)) * e.blockBytes
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
	e.serverSend(c, wire.Message{Type: wire.TypeAbortAck, KVRequestID: m.KVRequestID, RoundSeq: m.RoundSeq})
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
		e.serverSend(t.c, wire.Message{Type: wire.TypeTransferDone, KVRequestID: t.id, RoundSeq: t.round, Success: t.success, Bytes: t.bytes, Data: data})
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
