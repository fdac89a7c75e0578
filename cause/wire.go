package cause

import (
	"time"

	"p2pfault/event"
)

// The wire as evidence: where a link (--link) relays a pair, the tracker
// is also fed every control message through it (event.WireMsg), and a
// pull that no line explains is named from what it waited on: a connect
// with no connect_ack (the handshake), a lookup with no lookup_resp, a
// fetch with no transfer_done. vLLM logs neither of the first two, so on
// `--engine vllm` this is what keeps them from being unknown. The lines
// win where both speak: they name the timer.
//
// Memory is bounded by what is open: a pair keeps its unacked connects
// and each kv_request_id its unanswered messages; an answer closes them,
// and Forget drops what closed before the oldest pull that can need it.

// span is a connect sent at from and closed at to (-1: not yet): answered
// (its connect_ack passed) or given up (the decoder disconnected, or sent
// a new connect: its handshake deadline had passed).
type span struct {
	from, to time.Duration
	answered bool
}

// wireState is one peer's (link's) open and recently closed messages.
type wireState struct {
	connects []span            // decoder's connects, in order
	byID     map[string][]wmsg // messages naming a kv_request_id, in order
}

// wmsg is a message naming a kv_request_id: at is when it passed (-1:
// withheld or dropped, it answers nothing), seen when the link saw it.
type wmsg struct {
	at, seen time.Duration
	typ      string
}

// Wire takes one message through a link, seen at since t0.
func (t *Tracker) Wire(at time.Duration, w event.WireMsg) {
	if t.wire == nil {
		t.wire = map[string]*wireState{}
	}
	st := t.wire[w.Peer]
	if st == nil {
		st = &wireState{byID: map[string][]wmsg{}}
		t.wire[w.Peer] = st
	}
	switch {
	case w.Type == "connect" && w.Dir == event.WireToSource:
		st.giveUp(at)
		st.connects = append(st.connects, span{at, -1, false})
	case w.Type == "disconnect" && w.Dir == event.WireToSource:
		st.giveUp(at)
	case w.Type == "connect_ack" && w.Dir == event.WireToDecoder && !w.Withheld():
		if n := len(st.connects); n > 0 && st.connects[n-1].to < 0 {
			st.connects[n-1].to, st.connects[n-1].answered = at, true
		}
	}
	if id := w.PullID(); id != "" {
		passed := at
		if w.Withheld() {
			passed = -1 // never arrived: it answers nothing
		}
		st.byID[id] = append(st.byID[id], wmsg{passed, at, w.Type})
	}
}

// giveUp closes the open connects unanswered at at.
func (st *wireState) giveUp(at time.Duration) {
	for i := range st.connects {
		if st.connects[i].to < 0 {
			st.connects[i].to = at
		}
	}
}

// byWire is the cause the wire gives a pull that waited: what it waited
// on was still unanswered when it ended, and it had waited at least
// MinWait and at least half its latency on it.
func (t *Tracker) byWire(s event.Sample) (event.Cause, *event.Timer, bool) {
	st := t.wire[s.Peer]
	if st == nil {
		return "", nil, false
	}
	waitedOn := func(from, to time.Duration) bool {
		if from < 0 || from > s.End() || (to >= 0 && to <= s.End()) {
			return false
		}
		w := s.End() - max(from, s.Start)
		return w >= MinWait && 2*w >= s.Latency
	}
	if s.KVRequestID != "" {
		if c, ok := idCause(st.byID[s.KVRequestID], s, waitedOn); ok {
			return c, nil, true
		}
	}
	for i := len(st.connects) - 1; i >= 0; i-- {
		if c := st.connects[i]; !c.answered && t.gaveUpOn(c, s) {
			return event.CauseHandshake, nil, true
		}
	}
	return "", nil, false
}

// gaveUpOn says s waited on connect c, never answered: sent before s
// ended and open while s waited (MinWait at least, and at least as long
// as s took after), and either still open when s ended or given up while
// s was in flight, s ending within the at-once bound of it (a given-up
// handshake's waiters miss at once).
func (t *Tracker) gaveUpOn(c span, s event.Sample) bool {
	if c.from > s.End() {
		return false
	}
	end := s.End()
	if c.to >= 0 {
		if c.to < s.Start || c.to > s.End() || s.End()-c.to > t.cfg.AtOnce {
			return false
		}
		end = c.to
	}
	waited, after := end-max(c.from, s.Start), s.End()-end
	return waited >= MinWait && waited >= after
}

// idCause reads one pull's messages: a fetch never done and aborted (the
// abort never acked, or acked: the load timeout), or a lookup never
// answered.
func idCause(ms []wmsg, s event.Sample, waitedOn func(from, to time.Duration) bool) (event.Cause, bool) {
	sent := func(typ string) time.Duration {
		for _, m := range ms {
			if m.typ == typ && m.at >= 0 {
				return m.at
			}
		}
		return -1
	}
	answered := sent // an answer counts once it passed
	// A fetch with no transfer_done is named by the abort_fetch the load
	// timeout sends while the pull waits (without one: not named).
	if f, a := sent("fetch"), sent("abort_fetch"); f >= 0 && a >= s.Start && a <= s.End()+Skew {
		if done := answered("transfer_done"); done < 0 || done > a {
			if ack := answered("abort_ack"); ack >= 0 && ack <= s.End()+Skew {
				return event.CauseLoadTimeout, true
			}
			return event.CauseAbortAck, true
		}
	}
	if l := sent("lookup"); l >= 0 && waitedOn(l, answered("lookup_resp")) {
		return event.CauseLookupDeadline, true
	}
	return "", false
}

// forgetWire drops what was answered before at, and ids whose every
// message is older.
func (t *Tracker) forgetWire(at time.Duration) {
	for peer, st := range t.wire {
		i := 0
		for i < len(st.connects) && st.connects[i].to >= 0 && st.connects[i].to < at {
			i++
		}
		st.connects = st.connects[i:]
		for id, ms := range st.byID {
			if ms[len(ms)-1].seen < at {
				delete(st.byID, id)
			}
		}
		if len(st.connects) == 0 && len(st.byID) == 0 {
			delete(t.wire, peer)
		}
	}
}
