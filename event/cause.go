package event

import (
	"strconv"
	"time"
)

// Cause is what ended a pull: the vLLM mechanism (or the client's own
// deadline) that p2pfault found in the pull's outcome and the decoder's
// log. It is computed once, by the experiment as the pull ends (package
// cause), and carried on the Sample; faces only render it. "" is a sample
// written before causes existed, never a verdict of its own.
type Cause string

const (
	// CauseP2P: answered 200 with cached tokens: pulled over P2P.
	CauseP2P Cause = "p2p"
	// CauseLocal: a miss answered within the at-once bound with no reap
	// behind it: the lookup said MISS (or no session could be had) and the
	// decoder prefilled locally at once.
	CauseLocal Cause = "local"
	// CauseHeartbeat: the pull waited until its session was reaped on the
	// ZMQ heartbeat (control/zmq.py, HEARTBEAT_TIMEOUT 10 s).
	CauseHeartbeat Cause = "heartbeat"
	// CauseLookupDeadline: the sim's lookup deadline reaped the session
	// (sim/MODEL.md mechanism 3; vLLM main has none, #56836 proposes one).
	CauseLookupDeadline Cause = "lookup_deadline"
	// CauseHandshake: the pull waited on a new session until its
	// handshake deadline (session.py, VLLM_P2P_HANDSHAKE_TIMEOUT_S).
	CauseHandshake Cause = "handshake"
	// CausePeerDown: the session was reaped because the peer went away
	// (a reset, a disconnect, a refused connect) or for a reason the line
	// does not name (vLLM's bare "peer ... down"): not a timer.
	CausePeerDown Cause = "peer_down"
	// CauseLoadTimeout: the load waited the load timeout, the decoder sent
	// abort_fetch and the source acked it (client.py, _LOAD_TIMEOUT_S).
	CauseLoadTimeout Cause = "load_timeout"
	// CauseAbortAck: the load timed out and the abort was never acked
	// either (client.py, _LOAD_TIMEOUT_S + _ABORT_ACK_TIMEOUT_S).
	CauseAbortAck Cause = "abort_ack"
	// CauseSourceFailed: the source answered the pull's fetch failed
	// (transfer_done success false: e.g. its prefill ended without the
	// blocks asked for); the wait before it is the source's, no timer.
	CauseSourceFailed Cause = "source_failed"
	// CauseUnbound: the source reaped the store the pull's fetch was for,
	// unbound (manager.py _reap_unbound_stores, unbound_store_timeout_s).
	CauseUnbound Cause = "unbound_store"
	// CausePullTimeout: cut by the probe's own pull timeout (--pull-timeout).
	CausePullTimeout Cause = "pull_timeout"
	// CauseError: an error answer or a failed request.
	CauseError Cause = "error"
	// CauseRunEnd: still in flight when the run ended and cut short.
	CauseRunEnd Cause = "run_end"
	// CauseUnknown: the evidence does not say. The tool never guesses.
	CauseUnknown Cause = "unknown"
)

// Causes lists every cause in the order tables show them.
var Causes = []Cause{CauseP2P, CauseLocal, CauseHeartbeat, CauseLookupDeadline, CauseHandshake,
	CausePeerDown, CauseLoadTimeout, CauseAbortAck, CauseSourceFailed, CauseUnbound, CausePullTimeout, CauseError,
	CauseRunEnd, CauseUnknown}

// Label is the cause in words, as the faces print it.
func (c Cause) Label() string {
	switch c {
	case CauseP2P:
		return "pulled over P2P"
	case CauseLocal:
		return "missed at once, prefilled locally"
	case CauseHeartbeat:
		return "waited until the session was reaped on the heartbeat"
	case CauseLookupDeadline:
		return "waited until the lookup deadline reaped the session"
	case CauseHandshake:
		return "waited on a new session until the handshake deadline"
	case CausePeerDown:
		return "session reaped: peer down"
	case CauseLoadTimeout:
		return "waited the load timeout, abort acked"
	case CauseAbortAck:
		return "waited the load timeout and the abort-ack timeout"
	case CauseSourceFailed:
		return "its source failed the transfer"
	case CauseUnbound:
		return "its store was reaped unbound"
	case CausePullTimeout:
		return "cut by the pull timeout"
	case CauseError:
		return "an error"
	case CauseRunEnd:
		return "cut short by the run's end"
	case CauseUnknown:
		return "unknown: the evidence does not say"
	case "":
		return "not attributed (a stream from before causes)"
	}
	return string(c)
}

// Timer is the setting behind a cause as a line names it: its name (an
// environment variable, a constant of vLLM's source, a sim or p2pfault
// flag) and its value in this run. Zero when no timer explains the cause.
type Timer struct {
	Name  string        `json:"name"`
	Value time.Duration `json:"value_ns"`
}

// String is "NAME VALUE", or "" for none.
func (t Timer) String() string {
	if t.Name == "" {
		return ""
	}
	return t.Name + " " + FormatSeconds(t.Value)
}

// FormatSeconds is d as "30 s" or "7.5 s": a timer's value.
func FormatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64) + " s"
}

// CauseGroup is the pulls of a batch that one cause ended, naming one
// source, with one timer: how many and their shortest and longest latency.
type CauseGroup struct {
	Source   int
	Cause    Cause
	Timer    string // Timer.String(), "" for none
	N        int
	Min, Max time.Duration
}

// SlowByCause groups the samples of ss that took longer than over and
// carry a cause (a stream from before causes has none to name), in the
// order each group first appears: what the faces print as slow pulls end.
func SlowByCause(ss []Sample, over time.Duration) []CauseGroup {
	var out []CauseGroup
	for _, s := range ss {
		if s.Cause == "" || s.Latency <= over {
			continue
		}
		timer := ""
		if s.Timer != nil {
			timer = s.Timer.String()
		}
		i := 0
		for i < len(out) && (out[i].Source != s.Source || out[i].Cause != s.Cause || out[i].Timer != timer) {
			i++
		}
		if i == len(out) {
			out = append(out, CauseGroup{Source: s.Source, Cause: s.Cause, Timer: timer, Min: s.Latency, Max: s.Latency})
		}
		g := &out[i]
		g.N++
		g.Min, g.Max = min(g.Min, s.Latency), max(g.Max, s.Latency)
	}
	return out
}

// Words is the group as the faces print it: "2 pulls of source-0 took
// 12.0–30.0 s: waited on a new session until the handshake deadline
// (VLLM_P2P_HANDSHAKE_TIMEOUT_S 30 s)".
func (g CauseGroup) Words(secs func(time.Duration) string) string {
	took := secs(g.Max)
	if g.N > 1 && g.Min != g.Max {
		took = secs(g.Min) + "–" + secs(g.Max)
	}
	noun := "pulls"
	if g.N == 1 {
		noun = "pull"
	}
	out := strconv.Itoa(g.N) + " " + noun + " of " + SourceName(g.Source) + " took " + took + ": " + g.Cause.Label()
	if g.Timer != "" {
		out += " (" + g.Timer + ")"
	}
	return out
}
