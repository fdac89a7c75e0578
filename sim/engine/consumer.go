package engine

import (
	"net"
	"sort"
	"strconv"

	"time"

	"p2pfault/sim/wire"
)

type sessState int

const (
	sessDialing sessState = iota // TCP dial in flight
	sessPending                  // connect sent, no connect_ack yet
	sessReady
	sessDead
)

// session is the consumer side of one (this engine, peer) pair, keyed by the
// peer's literal "host:port". It never retries its connect: a session that
// does not become ready dies at its handshake deadline and the next request
// opens a new one.
type session struct {
	peer  string
	state sessState
	c     *conn

	handshakeDeadline time.Time
	// heard is when the peer last sent a message; the lookup deadline
	// counts from it or the DEALER's last PONG (superviseReady).
	heard time.Time

	waiters []*request          // wait mode: requests polling the pending handshake
	lookups map[string]*request // by wire kv_request_id
	loads   map[string]*request
	queued  []wire.Message // sent once the peer acks our connect (vLLM's _send_ready gate)
}

// sessionSend sends m on s, or queues it until s is ready, as vLLM's
// session does with everything it sends before connect_ack.
func (e *Engine) sessionSend(s *session, m wire.Message) {
	if s.state == sessDead {
		// A dead session's DEALER is closed: what it would send (an
		// orphaned load's abort_fetch) reaches nobody and is never acked.
		return
	}
	if s.state == sessReady {
		e.send(s.c, m)
		return
	}
	s.queued = append(s.queued, m)
}

// openSession starts a session with the request's source: its link's
// DEALER connects in the background (the TCP connect is reported on a
// step, dialed), then the connect goes out.
//
// The connect has no timeout of its own: like vLLM's session, it is
// bounded by the handshake deadline (superviseSessions), which closes the
// DEALER, so a connect hanging on unanswered SYNs (a partitioned source)
// ends as a handshake timeout.
func (e *Engine) openSession(src *RemoteSource) *session {
	s := &session{
		peer:              src.ID(),
		state:             sessDialing,
		handshakeDeadline: e.now.Add(e.cfg.HandshakeTimeout),
		lookups:           make(map[string]*request),
		loads:             make(map[string]*request),
	}
	e.sessions[s.peer] = s
	if e.shut {
		e.killSession(s, "engine shutting down")
		return s
	}
	l := e.links[s.peer]
	if l == nil {
		l = e.openLink(net.JoinHostPort(src.Host, strconv.Itoa(src.Port)))
	}
	e.nextConnID++
	s.c = &conn{id: e.nextConnID, l: l, sess: s}
	l.cons = s.c
	return s
}

// dialed is the session's TCP connect done (the DEALER's EVENT_CONNECTED;
// a stopped source's kernel completes it from its backlog): the connect
// goes out, queued by the DEALER until the ZMTP handshake is done.
func (e *Engine) dialed(s *session) {
	s.state = sessPending
	// The sim's line (vLLM's _get_or_create_session logs none): what the
	// session's waiters now wait on and until when, which p2pfault's
	// package cause reads to name the wait of pulls in flight.
	e.log.Info(compP2P, "P2PSession %s: connect sent, awaiting connect_ack (handshake timeout %s, session opened %s ago)",
		s.peer, secs(e.cfg.HandshakeTimeout), secs(e.cfg.HandshakeTimeout-s.handshakeDeadline.Sub(e.now)))
	e.send(s.c, e.connectMsg())
}

func (e *Engine) consumerFrame(c *conn, m wire.Message) {
	s := c.sess
	if s.state == sessDead || e.cfg.withhold != nil && e.cfg.withhold(m) {
		return
	}
	s.heard = e.now
	switch m.Type {
	case wire.TypeConnect:
		e.peerConnect(s, m)
	case wire.TypeConnectAck:
		e.connectAcked(s, m)
	case wire.TypeLookupResp:
		e.lookupAnswered(s, m)
	case wire.TypeTransferDone:
		r := s.loads[m.KVRequestID]
		if r == nil || r.state != rsLoad {
			return
		}
		delete(s.loads, m.KVRequestID)
		if !m.Success {
			e.loadFailed(r, "transfer failed at the source")
			return
		}
		e.loaded(r, r.fetched, m.Bytes, m.Data)
	case wire.TypeAbortAck:
		r := s.loads[m.KVRequestID]
		if r == nil || r.state != rsAbort {
			return
		}
		delete(s.loads, m.KVRequestID)
		e.loadFailed(r, "load timed out after "+secs(e.cfg.LoadTimeout)+" and was aborted")
	case wire.TypeDisconnect:
		e.killSession(s, "peer disconnected")
	}
}

// peerConnect is the source's own connect on the session (the handshake
// is symmetric, session.py): validated as vLLM validates it, then acked.
// A mismatch is logged and answered with nothing, and the session dies;
// a connect after the handshake is a protocol error that ends it.
func (e *Engine) peerConnect(s *session, m wire.Message) {
	if s.state == sessReady {
		e.log.Error(compP2P, "P2PSession %s: protocol error: duplicate connect after handshake — disconnecting", s.peer)
		e.killSession(s, "protocol error: duplicate connect after handshake")
		return
	}
	if reason := e.connectMismatch(m, s.peer); reason != "" {
		e.rejectConnect(s.peer, reason)
		e.killSession(s, "protocol error: "+reason)
		return
	}
	// vLLM's decoder registers the source on its connect
	// (add_remote_peer) before it acks.
	e.registerPeer()
	e.send(s.c, wire.Message{Type: wire.TypeConnectAck, PeerID: e.id})
}

// connectAcked is a ConnectAck on a pending session: the session is
// ready once the peer has answered as itself, and what waited for it is
// sent. A step of its own so that consumerFrame reads as the protocol's
// table of messages.
func (e *Engine) connectAcked(s *session, m wire.Message) {
	if s.state != sessPending {
		return
	}
	if m.PeerID != s.peer {
		// Replies are routed by the literal identity, so a peer that
		// calls itself otherwise can never be talked to.
		e.killSession(s, "peer answered as "+m.PeerID+": identities must match literally")
		return
	}
	s.state = sessReady
	if rf := e.refused[s.peer]; rf != nil && rf.total > 1 {
		e.log.Info(compP2P, "peer %s connected (%d connects refused while it was down)", s.peer, rf.total)
	} else {
		e.log.Info(compP2P, "peer %s connected", s.peer)
	}
	delete(e.refused, s.peer)
	for _, q := range s.queued {
		e.send(s.c, q)
	}
	s.queued = nil
}

// lookupAnswered is a LookupResp: the hits the source holds start a load
// (none: the request computes its prefix itself). A step of its own for
// the same reason as connectAcked.
func (e *Engine) lookupAnswered(s *session, m wire.Message) {
	r := s.lookups[m.KVRequestID]
	if r == nil {
		return
	}
	delete(s.lookups, m.KVRequestID)
	want := r.maxHit - r.localHit()
	n := 0
	for n < len(m.Hits) && n < want && m.Hits[n] {
		n++
	}
	if n == 0 {
		// The empty fetch ends the lookup phase on the source (it
		// releases what the lookup pinned; protocol.py FetchMsg).
		e.send(s.c, wire.Message{Type: wire.TypeFetch, KVRequestID: m.KVRequestID})
		e.miss(r)
		return
	}
	e.lookupResolved(r)
	keys := r.hashes[r.localHit() : r.localHit()+n]
	e.reserveLoad(r, keys)
	r.state = rsLoad
	r.fetched = n
	r.deadline = e.now.Add(e.cfg.LoadTimeout)
	s.loads[m.KVRequestID] = r
	e.send(s.c, fetchMsg(m.KVRequestID, keys))
}

// fetchMsg is a fetch of keys; the block indexes are where the sim's
// consumer writes them, in order (its data plane reads none of them).
func fetchMsg(id string, hashes []uint64) wire.Message {
	idx := make([]int64, len(hashes))
	for i := range idx {
		idx[i] = int64(i)
	}
	return wire.Message{Type: wire.TypeFetch, KVRequestID: id, Keys: wire.KeysOf(hashes), BlockIndexes: idx}
}

// superviseSessions enforces the consumer's deadlines and heartbeats, in a
// fixed order so equal deadlines resolve the same way every run.
func (e *Engine) superviseSessions() {
	peers := make([]string, 0, len(e.sessions))
	for p := range e.sessions {
		peers = append(peers, p)
	}
	sort.Strings(peers)
	for _, p := range peers {
		s := e.sessions[p]
		switch s.state {
		case sessDialing, sessPending:
			if !e.now.Before(s.handshakeDeadline) {
				// session.py P2PSession.poll's line (p2pfault's package cause reads it).
				e.log.Warning(compP2P, "P2PSession %s: handshake timed out after %s — marking connection dead", s.peer, secs(e.cfg.HandshakeTimeout))
				e.killSession(s, "handshake timed out")
				continue
			}
			// A PD load is submitted before the session is ready and its
			// timeout runs from then (client.py's submitted_at); only PD
			// loads can wait on a pending session.
			e.superviseLoads(s)
		case sessReady:
			e.superviseReady(s)
		}
	}
	e.superviseOrphans()
}

// reapSilent reaps a ready session whose peer fell silent (its heartbeat
// or lookup deadline). Silence says nothing of whether the peer is still
// writing the loads this session sent fetches for ("ZMQ disconnect is not
// NIXL quiescence", manager.py), so under DeadLoadsTimeout they outlive
// the session: each runs to its load timeout, sends its abort into the
// dead connection and fails when the abort-ack timeout passes (MODEL.md
// mechanism 29). A connection the peer closed or reset, a disconnect, a
// refused connect or a handshake timeout still fail them at once: the
// first three are the peer's own end, and a session never acked sent no
// fetch.
func (e *Engine) reapSilent(s *session, reason string) {
	var kept map[string]*request
	if e.cfg.DeadSessionLoads == DeadLoadsTimeout && len(s.loads) > 0 {
		kept, s.loads = s.loads, nil
	}
	e.killSession(s, reason)
	if kept == nil {
		return
	}
	s.loads = kept
	e.orphans = append(e.orphans, s)
	e.log.Warning(compP2P, "P2P %s: session %s died with %d unacknowledged load(s); retaining them until their load timeout", e.id, s.peer, len(kept))
}

// superviseOrphans runs the load deadlines of dead sessions' retained
// loads and forgets a session once its last load has ended.
func (e *Engine) superviseOrphans() {
	live := e.orphans[:0]
	for _, s := range e.orphans {
		e.superviseLoads(s)
		if len(s.loads) > 0 {
			live = append(live, s)
		}
	}
	clear(e.orphans[len(live):])
	e.orphans = live
}

func (e *Engine) superviseReady(s *session) {
	switch e.cfg.LookupDeadline {
	case LookupSilence:
		if e.silenceExpired(s) {
			return
		}
	case LookupProgress:
		if e.progressExpired(s) {
			return
		}
	}
	// LookupNone: an unanswered lookup waits until its request ends
	// (cancelLookup) or the session dies. The heartbeat is libzmq's, on
	// the link's DEALER (linkEvent).
	e.superviseLoads(s)
}

// silenceExpired is the seed's build's lookup deadline, which reaps s
// when it is due. It is progress on the session, not a clock per request:
// lookups are waiting and the peer has said nothing for the lookup timeout
// (MODEL.md, "lookup deadline"). A frozen peer is thus reaped a fixed time
// after it last spoke, whenever the lookups that wait on it were sent,
// which is what lets the seed's in-flight request end at 7.08 s under an
// 8 s timeout. A peer that keeps answering pings but never a lookup is
// still caught by each lookup's own deadline. The peer's last word is its
// last message or its last heartbeat PONG on the DEALER, whichever came
// later.
func (e *Engine) silenceExpired(s *session) bool {
	heard := s.heard
	if h := s.c.l.dealer.LastHeard(); h.After(heard) {
		heard = h
	}
	if len(s.lookups) > 0 && !e.now.Before(heard.Add(e.cfg.LookupTimeout)) {
		e.log.Warning(compP2P, "lookup on %s timed out after %s: no answer from the peer while %d lookups waited", s.peer, secs(e.cfg.LookupTimeout), len(s.lookups))
		e.reapSilent(s, "lookup timed out")
		return true
	}
	if e.overdueLookup(s) != nil {
		// One unanswered lookup reaps the whole session.
		e.log.Warning(compP2P, "lookup on %s timed out after %s", s.peer, secs(e.cfg.LookupTimeout))
		e.reapSilent(s, "lookup timed out")
		return true
	}
	return false
}

// overdueLookup is the earliest request of s whose lookup is past its
// deadline, nil when none is: run every step, so it sorts nothing.
func (e *Engine) overdueLookup(s *session) *request {
	var first *request
	for _, r := range s.lookups {
		if !e.now.Before(r.deadline) && (first == nil || r.id < first.id) {
			first = r
		}
	}
	return first
}

// progressExpired is #56836's deadline, which reaps s when it is due: a
// request whose lookup has been unanswered for the lookup timeout since it
// was sent marks the whole peer session dead ("An expired lookup marks the
// whole peer session dead"), whatever the heartbeats say ("not a
// transport-arrival timestamp"). The sim sends a request's keys in one
// lookup, answered in one lookup_resp, so its deadline is never rearmed.
// The warning names the peer, the request and the time without progress,
// as the PR's does; the earliest request is named, so equal deadlines log
// alike every run.
func (e *Engine) progressExpired(s *session) bool {
	r := e.overdueLookup(s)
	if r == nil {
		return false
	}
	e.log.Warning(compP2P, "lookup on %s timed out after %s: request %s made no progress", s.peer, secs(e.cfg.LookupTimeout), r.in.Source.KVRequestID)
	e.reapSilent(s, "lookup timed out")
	return true
}

// lookupDeadline names the lookup deadline in force, for the start line.
func (e *Engine) lookupDeadline() string {
	if e.cfg.LookupDeadline == LookupNone {
		return "none"
	}
	return e.cfg.LookupDeadline.String() + " " + secs(e.cfg.LookupTimeout)
}

// cancelLookup ends a request whose client went away while its lookup
// waited: vLLM's finish_request → ClientRole.finish clears its probes and
// owes the peer the terminal empty fetch (its lookup was sent, so the peer
// holds lookup state no fetch has closed: client.py peer_lookup_open).
func (e *Engine) cancelLookup(r *request) {
	if s := r.sess; s != nil && s.lookups[r.wireID] == r {
		delete(s.lookups, r.wireID)
		e.send(s.c, wire.Message{Type: wire.TypeFetch, KVRequestID: r.wireID})
	}
	r.sess = nil
	e.drop(r)
}

// superviseLoads runs the client's load deadlines (client.py
// collect_results): a load not done in the load timeout sends abort_fetch;
// an abort not acknowledged in the abort-ack timeout fails the load.
func (e *Engine) superviseLoads(s *session) {
	var due []*request
	for _, r := range s.loads {
		if !e.now.Before(r.deadline) {
			due = append(due, r)
		}
	}
	// In request order, so equal deadlines log the same way every run.
	if len(due) > 1 {
		sort.Slice(due, func(i, j int) bool { return due[i].id < due[j].id })
	}
	for _, r := range due {
		if r.state == rsLoad {
			// client.py ClientRole.collect_results's line, with the sim's timeout after it.
			e.log.Warning(compP2P, "P2PSession %s: %s timed out, sending abort (load timeout %s)", s.peer, r.in.Source.KVRequestID, secs(e.cfg.LoadTimeout))
			r.state = rsAbort
			r.deadline = e.now.Add(e.cfg.AbortAckTimeout)
			e.sessionSend(s, wire.Message{Type: wire.TypeAbortFetch, KVRequestID: r.wireID})
			continue
		}
		delete(s.loads, r.wireID)
		// client.py ClientRole.collect_results's line, with the sim's timeout after it.
		e.log.Warning(compP2P, "P2PSession %s: abort_ack timed out for kv_request_id=%s after %s", s.peer, r.in.Source.KVRequestID, secs(e.cfg.AbortAckTimeout))
		e.loadFailed(r, "abort not acknowledged within "+secs(e.cfg.AbortAckTimeout))
	}
}

// refusals counts the connects a peer refused since it last answered one.
type refusals struct {
	total    int       // refused connects in a row
	unlogged int       // of those, refused since the last log line
	logged   time.Time // of the last log line
}

// connectRefused reaps a session whose connect was refused. Each new
// request dials again (vLLM retries a refused connect silently), so a peer
// that is down for long would log a line per request: the first refusal
// is logged, then one summary line per heartbeat timeout while it lasts,
// and the connect that finally succeeds says how many were refused.
func (e *Engine) connectRefused(s *session) {
	rf := e.refused[s.peer]
	if rf == nil {
		rf = &refusals{logged: e.now}
		e.refused[s.peer] = rf
		rf.total++
		e.killSession(s, "connection refused")
		return
	}
	rf.total++
	rf.unlogged++
	if e.now.Sub(rf.logged) >= e.cfg.HeartbeatTimeout {
		e.log.Warning(compP2P, "peer %s still down: %d connects refused in the last %s", s.peer, rf.unlogged, secs(e.now.Sub(rf.logged)))
		rf.logged, rf.unlogged = e.now, 0
	}
	e.endSession(s, "connection refused")
}

// killSession reaps s: requests waiting on its handshake or lookups miss
// and prefill locally; loads in flight fail under the load-failure policy.
func (e *Engine) killSession(s *session, reason string) {
	if s.state == sessDead {
		return
	}
	// manager.py _reap_dead_sessions's line, with the sim's reason after it.
	e.log.Warning(compP2P, "P2P %s: peer %s down: %s", e.id, s.peer, reason)
	e.endSession(s, reason)
}

// endSession is killSession without the log line.
func (e *Engine) endSession(s *session, reason string) {
	if s.state == sessDead {
		return
	}
	connected := s.state != sessDialing
	s.state = sessDead
	if e.sessions[s.peer] == s {
		delete(e.sessions, s.peer)
	}
	if s.c != nil {
		// session.py close(): a best-effort disconnect, then the socket
		// closes (libzmq still sends what is queued).
		if connected {
			e.send(s.c, wire.Message{Type: wire.TypeDisconnect})
		}
		e.closeAfterFlush(s.c)
	}
	for _, r := range s.waiters {
		if r.state == rsWaitSession && r.sess == s {
			e.miss(r)
		}
	}
	s.waiters = nil
	for _, r := range sortedByID(s.lookups) {
		e.miss(r)
	}
	s.lookups = nil
	for _, r := range sortedByID(s.loads) {
		e.loadFailed(r, "peer "+s.peer+" down: "+reason)
	}
	s.loads = nil
	s.queued = nil
}

func sortedByID(m map[string]*request) []*request {
	out := make([]*request, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// secs formats a duration as vLLM's logs do: "30.0s".
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s" }
