// Package cause names what ended each pull (event.Cause) from what
// p2pfault sees of it: the pull's outcome (hit, miss, error, cut by the
// pull timeout), the engines' log lines — matched to the pull by its
// kv_request_id where the line names one, else by the peer the line names
// and the instant p2pfault read it — and the bounds of the run. The
// experiment feeds a Tracker every engine line as it is printed and asks
// it once per sample, as the pull ends; the faces only render the result.
//
// A cause needs evidence. A miss that took longer than the at-once bound
// and that no line explains is CauseUnknown: the tracker never infers a
// mechanism from a latency alone.
package cause

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
)

// The lines, as vLLM's source prints them (vllm/v1/kv_offload/tiering/p2p/,
// read with the search tool) and the sim after it (sim/engine). Each
// pattern also takes the sim's additions, which follow vLLM's text.
var (
	// manager.py, P2PConnectorManager._reap_dead_sessions:
	//   logger.warning("P2P %s: peer %s down", self._local_id, pid)
	// The sim appends ": REASON" (heartbeat timed out after 10.0s, handshake
	// timed out, lookup timed out, connection closed: reset, ...).
	rePeerDown = regexp.MustCompile(`P2P \S+: peer (\S+) down(?:: (.*))?$`)
	// session/session.py, P2PSession.poll:
	//   "P2PSession %s: handshake timed out after %ds — marking connection dead"
	// (peer_id, envs.VLLM_P2P_HANDSHAKE_TIMEOUT_S); the sim prints "30.0s".
	reHandshake = regexp.MustCompile(`P2PSession (\S+): handshake timed out after ([0-9.]+)s`)
	// session/client.py, ClientRole.collect_results:
	//   "P2PSession %s: %s timed out, sending abort" (peer_id, kv_request_id)
	// The sim appends " (load timeout 30.0s)"; vLLM's _LOAD_TIMEOUT_S is a
	// constant of client.py (30.0).
	reLoadAbort = regexp.MustCompile(`P2PSession (\S+): (\S+) timed out, sending abort(?: \(load timeout ([0-9.]+)s\))?`)
	// session/client.py, ClientRole.collect_results:
	//   "P2PSession %s: abort_ack timed out for kv_request_id=%s"
	// The sim appends " after 10.0s"; vLLM's _ABORT_ACK_TIMEOUT_S is 10.0.
	reAbortAck = regexp.MustCompile(`P2PSession (\S+): abort_ack timed out for kv_request_id=(\S+?)(?: after ([0-9.]+)s)?$`)
	// manager.py, P2PConnectorManager._reap_unbound_stores (the source's log):
	//   "P2P %s: unbound store kv_request_id=%s timed out after %.0fs without
	//   a fetch — failing %d job(s)"
	reUnbound = regexp.MustCompile(`unbound store kv_request_id=(\S+) timed out after ([0-9.]+)s without a fetch`)
	// The sim's lookup deadline (sim/engine/consumer.go silenceExpired and
	// progressExpired, MODEL.md mechanism 3: the seed's build and #56836's;
	// not on vLLM main): "lookup on %s timed out after %s: ...", followed by
	// the peer-down line.
	reLookup = regexp.MustCompile(`lookup on (\S+) timed out after ([0-9.]+)s`)
	// The sim's decoder on a transfer_done that says failed
	// (sim/engine/consumer.go; vLLM's client.py on_transfer_done logs
	// nothing: on vLLM such a pull has no line and is unknown).
	reSourceFailed = regexp.MustCompile(`KV load for (\S+) from \S+ failed \(transfer failed at the source\)`)
	// The sim's heartbeat reason in its peer-down line.
	reHeartbeat = regexp.MustCompile(`heartbeat timed out after ([0-9.]+)s`)
)

// vLLM's constants where its lines do not print the value.
const (
	vllmLoadTimeout     = 30 * time.Second // client.py _LOAD_TIMEOUT_S
	vllmAbortAckTimeout = 10 * time.Second // client.py _ABORT_ACK_TIMEOUT_S
)

// The timers' names, as the tables print them.
const (
	TimerHeartbeat = "HEARTBEAT_TIMEOUT"                      // control/zmq.py, ms there
	TimerLookup    = "--sim-lookup-timeout"                   // the sim's flag
	TimerHandshake = "VLLM_P2P_HANDSHAKE_TIMEOUT_S"           // session.py
	TimerLoad      = "_LOAD_TIMEOUT_S"                        // client.py
	TimerAbortAck  = "_LOAD_TIMEOUT_S + _ABORT_ACK_TIMEOUT_S" // client.py
	TimerUnbound   = "unbound_store_timeout_s"                // --kv-transfer-config
	TimerPull      = "--pull-timeout"                         // p2pfault's probe
)

// Config is what the tracker knows of the run.
type Config struct {
	// AtOnce is how soon after a reap a pull that waited on it ends, and
	// the longest a miss may take to count as missed at once (the bounds'
	// FaultedMedian: what the checks call a fast answer).
	AtOnce time.Duration
	// PullTimeout is the probe's pull timeout (the timer of CausePullTimeout).
	PullTimeout time.Duration
}

// Skew is how much later than a pull's end p2pfault may read the line
// that ended it: the engine writes the line before it answers, but the
// line travels through a pipe and a goroutine, the answer through a socket.
const Skew = 500 * time.Millisecond

// MinWait is the least a pull must have waited before a reap for the
// reap to explain it: below it the pull was a local prefill's length, not
// a wait (a prefill of a few hundred tokens takes tens of milliseconds).
const MinWait = 100 * time.Millisecond

type mark struct {
	at    time.Duration
	cause event.Cause
	timer *event.Timer
}

// Tracker holds the lines that can explain a pull, by peer and by id.
// Not safe for concurrent use: the experiment holds its lock.
type Tracker struct {
	cfg   Config
	peers map[string][]mark     // the decoder's reaps, per peer address, in order
	ids   map[string][]mark     // lines naming a kv_request_id, in order
	wire  map[string]*wireState // the links' messages, per peer (wire.go)
}

// New returns an empty tracker.
func New(cfg Config) *Tracker {
	return &Tracker{cfg: cfg, peers: map[string][]mark{}, ids: map[string][]mark{}}
}

func seconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// Log takes one engine line, read at since t0. decoder says whether the
// decoder printed it: only the decoder's reaps bear on its pulls (a
// source's "peer down" names the decoder), while a line naming an id may
// come from either side (the unbound store is the source's).
func (t *Tracker) Log(at time.Duration, decoder bool, line string) {
	if m := reUnbound.FindStringSubmatch(line); m != nil {
		t.ids[m[1]] = append(t.ids[m[1]], mark{at, event.CauseUnbound, &event.Timer{Name: TimerUnbound, Value: seconds(m[2])}})
		return
	}
	if !decoder {
		return
	}
	if m := reAbortAck.FindStringSubmatch(line); m != nil {
		v := vllmAbortAckTimeout
		if m[3] != "" {
			v = seconds(m[3])
		}
		load := vllmLoadTimeout
		for _, k := range t.ids[m[2]] {
			if k.cause == event.CauseLoadTimeout {
				load = k.timer.Value
			}
		}
		t.ids[m[2]] = append(t.ids[m[2]], mark{at, event.CauseAbortAck, &event.Timer{Name: TimerAbortAck, Value: load + v}})
		return
	}
	if m := reSourceFailed.FindStringSubmatch(line); m != nil {
		t.ids[m[1]] = append(t.ids[m[1]], mark{at, event.CauseSourceFailed, nil})
		return
	}
	if m := reLoadAbort.FindStringSubmatch(line); m != nil {
		v := vllmLoadTimeout
		if m[3] != "" {
			v = seconds(m[3])
		}
		t.ids[m[2]] = append(t.ids[m[2]], mark{at, event.CauseLoadTimeout, &event.Timer{Name: TimerLoad, Value: v}})
		return
	}
	if m := reHandshake.FindStringSubmatch(line); m != nil {
		t.peers[m[1]] = append(t.peers[m[1]], mark{at, event.CauseHandshake, &event.Timer{Name: TimerHandshake, Value: seconds(m[2])}})
		return
	}
	if m := reLookup.FindStringSubmatch(line); m != nil {
		t.peers[m[1]] = append(t.peers[m[1]], mark{at, event.CauseLookupDeadline, &event.Timer{Name: TimerLookup, Value: seconds(m[2])}})
		return
	}
	if m := rePeerDown.FindStringSubmatch(line); m != nil {
		peer, reason := m[1], m[2]
		if h := reHeartbeat.FindStringSubmatch(reason); h != nil {
			t.peers[peer] = append(t.peers[peer], mark{at, event.CauseHeartbeat, &event.Timer{Name: TimerHeartbeat, Value: seconds(h[1])}})
			return
		}
		// The reap that follows a deadline's own line (vLLM's bare line
		// after "handshake timed out", the sim's "handshake timed out" or
		// "lookup timed out" reason) adds nothing: that line named it.
		if ms := t.peers[peer]; len(ms) > 0 {
			last := ms[len(ms)-1]
			if (last.cause == event.CauseHandshake || last.cause == event.CauseLookupDeadline) && at-last.at <= Skew {
				return
			}
		}
		if strings.Contains(reason, "handshake timed out") || strings.Contains(reason, "lookup timed out") {
			return // its deadline's line was not seen: the reap is still a peer down
		}
		t.peers[peer] = append(t.peers[peer], mark{at, event.CausePeerDown, nil})
	}
}

// Of is the cause of s, a pull that has ended, and its timer (nil for
// none), from its outcome and the lines taken so far.
func (t *Tracker) Of(s event.Sample) (event.Cause, *event.Timer) {
	c, tm, _ := t.Attribute(s)
	return c, tm
}

// Attribute is Of, and whether the cause was read from the wire: no line
// explained the pull (Sample.ByWire), which the lines would have called
// unknown, local or an error.
func (t *Tracker) Attribute(s event.Sample) (event.Cause, *event.Timer, bool) {
	c, tm := t.of(s)
	if c != event.CauseUnknown && c != event.CauseLocal && c != event.CauseError {
		return c, tm, false
	}
	if wc, wtm, ok := t.byWire(s); ok {
		return wc, wtm, true
	}
	return c, tm, false
}

func (t *Tracker) of(s event.Sample) (event.Cause, *event.Timer) {
	if s.Aborted {
		return event.CauseRunEnd, nil
	}
	// probe.describe's words for the pull timeout, before an answer or
	// while its body was read.
	if strings.HasSuffix(s.Err, "(timeout)") {
		return event.CausePullTimeout, &event.Timer{Name: TimerPull, Value: t.cfg.PullTimeout}
	}
	if s.Hit() && s.Err == "" {
		return event.CauseP2P, nil
	}
	// A miss or an error: what the logs say ended it.
	if c, tm, ok := t.byID(s); ok {
		return c, tm
	}
	if c, tm, ok := t.byPeer(s); ok {
		return c, tm
	}
	if s.Err != "" || s.Status != 200 {
		return event.CauseError, nil
	}
	if s.Latency <= t.cfg.AtOnce {
		return event.CauseLocal, nil
	}
	return event.CauseUnknown, nil
}

// byID is the cause a line naming the pull's kv_request_id gives: a load
// that timed out while the pull ran (the abort-ack's line wins over the
// abort's), or the store the pull's fetch was for, reaped unbound before
// the pull ended (it may be reaped before the pull starts: it was parked
// by the prefill leg).
func (t *Tracker) byID(s event.Sample) (event.Cause, *event.Timer, bool) {
	if s.KVRequestID == "" {
		return "", nil, false
	}
	var found *mark
	for i, m := range t.ids[s.KVRequestID] {
		if m.at > s.End()+Skew {
			break
		}
		if m.cause != event.CauseUnbound && m.at < s.Start {
			continue
		}
		if found == nil || rank(m.cause) >= rank(found.cause) {
			found = &t.ids[s.KVRequestID][i]
		}
	}
	if found == nil {
		return "", nil, false
	}
	return found.cause, found.timer, true
}

func rank(c event.Cause) int {
	// What the source failed after a timeout or an unbound reap is that
	// mechanism's doing: the more specific line wins.
	switch c {
	case event.CauseAbortAck:
		return 3
	case event.CauseLoadTimeout:
		return 2
	case event.CauseUnbound:
		return 1
	}
	return 0
}

// byPeer is the cause of the latest reap of the pull's peer that the pull
// was waiting for: logged while it was in flight, the pull ended within
// the at-once bound of it (a reaped session's waiters miss and prefill
// locally at once), and it had waited before the reap at least MinWait
// and at least as long as it took after it. A pull that spent its time
// after the reap did not wait on it (#64501's arm prefills at once beside
// a pending handshake that times out meanwhile, a pull a reset caught as
// it was sent).
func (t *Tracker) byPeer(s event.Sample) (event.Cause, *event.Timer, bool) {
	if s.Peer == "" {
		return "", nil, false
	}
	ms := t.peers[s.Peer]
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if m.at > s.End()+Skew {
			continue
		}
		// A line read after the answer (up to Skew late) was logged before
		// it: the pull's wait is at most its latency.
		reap := min(m.at, s.End())
		waited, after := reap-s.Start, s.End()-reap
		if m.at < s.Start || after > t.cfg.AtOnce || waited < MinWait || waited < after {
			return "", nil, false
		}
		return m.cause, m.timer, true
	}
	return "", nil, false
}

// Forget drops the lines read before at: nothing that ended then or later
// can need them (the experiment passes now less the pull timeout and the
// longest timer's span).
func (t *Tracker) Forget(at time.Duration) {
	t.forgetWire(at)
	for k, ms := range t.peers {
		if ms = drop(ms, at); len(ms) == 0 {
			delete(t.peers, k)
		} else {
			t.peers[k] = ms
		}
	}
	for k, ms := range t.ids {
		if ms = drop(ms, at); len(ms) == 0 {
			delete(t.ids, k)
		} else {
			t.ids[k] = ms
		}
	}
}

func drop(ms []mark, at time.Duration) []mark {
	i := 0
	for i < len(ms) && ms[i].at < at {
		i++
	}
	return ms[i:]
}
