package cause

import (
	"testing"
	"time"

	"p2pfault/event"
)

const (
	peer  = "127.0.0.1:7777"
	other = "127.0.0.1:7778"
	id    = "3f0c2a52-8b8e-4d61-9a3e-1f0e2d7b6c55"
)

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// line is one engine line as the experiment hands it over.
type line struct {
	at      float64 // seconds since t0, when p2pfault read it
	decoder bool
	text    string
}

func miss(start, latency float64) event.Sample {
	return event.Sample{Peer: peer, KVRequestID: id, Start: sec(start), Latency: sec(latency), Status: 200, PromptTokens: 400}
}

// TestCauses feeds each cause the lines and the outcome that produce it,
// and checks the cause and its timer with the value the line gave.
func TestCauses(t *testing.T) {
	hit := miss(10, 0.05)
	hit.CachedTokens = 384
	timeout := miss(10, 60)
	timeout.Status, timeout.Err = 0, "POST http://127.0.0.1:8000/v1/completions: no answer within 1m0s (timeout)"
	bodyCut := miss(10, 60)
	bodyCut.Err = "POST http://127.0.0.1:8000/v1/completions: answered 200 but the body was not read within 1m0s (timeout)"
	failed := miss(10, 0.2)
	failed.Status, failed.Err = 500, "POST http://127.0.0.1:8000/v1/completions: 500: KV load failed"
	refused := miss(10, 0.01)
	refused.Status, refused.Err = 0, "POST http://127.0.0.1:8000/v1/completions: connection refused"
	aborted := miss(10, 3)
	aborted.Status, aborted.Aborted = 0, true
	aborted.Err = "POST http://127.0.0.1:8000/v1/completions: no answer: interrupted"

	tests := []struct {
		name  string
		lines []line
		s     event.Sample
		cause event.Cause
		timer *event.Timer
	}{
		{name: "a hit is pulled over P2P", s: hit, cause: event.CauseP2P},
		{name: "a fast miss with no reap is missed at once", s: miss(10, 0.03), cause: event.CauseLocal},
		{name: "the sim's heartbeat reap",
			lines: []line{{22.0, true, "WARNING 12-01 23:15:33 [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: heartbeat timed out after 10.0s"}},
			s:     miss(11, 11.01), cause: event.CauseHeartbeat, timer: &event.Timer{Name: TimerHeartbeat, Value: 10 * time.Second}},
		{name: "the sim's lookup deadline, then its reap",
			lines: []line{
				{18.0, true, "WARNING 12-01 23:15:33 [p2p] lookup on " + peer + " timed out after 8.0s: no answer from the peer while 3 lookups waited"},
				{18.0, true, "WARNING 12-01 23:15:33 [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: lookup timed out"},
			},
			s: miss(11, 7.02), cause: event.CauseLookupDeadline, timer: &event.Timer{Name: TimerLookup, Value: 8 * time.Second}},
		{name: "vLLM's handshake deadline, then its bare reap",
			lines: []line{
				{52.0, true, "WARNING 12-01 23:15:33 [session.py:210] P2PSession " + peer + ": handshake timed out after 30s — marking connection dead"},
				{52.01, true, "WARNING 12-01 23:15:33 [manager.py:611] P2P decoder-0: peer " + peer + " down"},
			},
			s: miss(22.5, 29.52), cause: event.CauseHandshake, timer: &event.Timer{Name: TimerHandshake, Value: 30 * time.Second}},
		{name: "the sim's handshake deadline at a compressed time scale",
			lines: []line{
				{26.0, true, "WARNING 12-01 23:15:33 [p2p] P2PSession " + peer + ": handshake timed out after 15.0s — marking connection dead"},
				{26.0, true, "WARNING 12-01 23:15:33 [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: handshake timed out"},
			},
			s: miss(12, 14.0), cause: event.CauseHandshake, timer: &event.Timer{Name: TimerHandshake, Value: 15 * time.Second}},
		{name: "a fast miss beside a handshake deadline did not wait on it",
			lines: []line{{52.0, true, "WARNING [p2p] P2PSession " + peer + ": handshake timed out after 30.0s — marking connection dead"}},
			s:     miss(51.98, 0.041), cause: event.CauseLocal},
		{name: "a pull that waited 1.5 s for the heartbeat is the heartbeat's",
			lines: []line{{22.0, true, "WARNING [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: heartbeat timed out after 10.0s"}},
			s:     miss(20.5, 1.51), cause: event.CauseHeartbeat, timer: &event.Timer{Name: TimerHeartbeat, Value: 10 * time.Second}},
		{name: "a line read after a fast pull's answer does not make it wait",
			lines: []line{{40.3, true, "WARNING [p2p] P2PSession " + peer + ": handshake timed out after 30.0s — marking connection dead"}},
			s:     miss(40.2, 0.044), cause: event.CauseLocal},
		{name: "a line read after a slow pull's answer still names it",
			lines: []line{{22.3, true, "WARNING [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: heartbeat timed out after 10.0s"}},
			s:     miss(11, 11.02), cause: event.CauseHeartbeat, timer: &event.Timer{Name: TimerHeartbeat, Value: 10 * time.Second}},
		{name: "a pull a reset caught as it was sent did not wait",
			lines: []line{{30.005, true, "WARNING [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: connection closed: reset"}},
			s:     miss(30, 0.02), cause: event.CauseLocal},
		{name: "vLLM's bare reap names no timer",
			lines: []line{{15.0, true, "WARNING 12-01 23:15:33 [manager.py:611] P2P decoder-0: peer " + peer + " down"}},
			s:     miss(11, 4.05), cause: event.CausePeerDown},
		{name: "vLLM's load timeout, abort acked",
			lines: []line{{45.0, true, "WARNING 12-01 23:15:33 [client.py:401] P2PSession " + peer + ": " + id + " timed out, sending abort"}},
			s:     miss(15, 30.1), cause: event.CauseLoadTimeout, timer: &event.Timer{Name: TimerLoad, Value: 30 * time.Second}},
		{name: "the sim's load timeout names its value",
			lines: []line{{27.5, true, "WARNING 12-01 23:15:33 [p2p] P2PSession " + peer + ": " + id + " timed out, sending abort (load timeout 15.0s)"}},
			s:     miss(12.5, 15.1), cause: event.CauseLoadTimeout, timer: &event.Timer{Name: TimerLoad, Value: 15 * time.Second}},
		{name: "load timeout and abort-ack timeout",
			lines: []line{
				{45.0, true, "WARNING 12-01 23:15:33 [client.py:401] P2PSession " + peer + ": " + id + " timed out, sending abort"},
				{55.0, true, "WARNING 12-01 23:15:33 [client.py:420] P2PSession " + peer + ": abort_ack timed out for kv_request_id=" + id},
			},
			s: miss(15, 40.05), cause: event.CauseAbortAck, timer: &event.Timer{Name: TimerAbortAck, Value: 40 * time.Second}},
		{name: "the source reaped the store unbound before the fetch",
			lines: []line{{70.0, false, "WARNING 12-01 23:15:33 [manager.py:650] P2P source-0: unbound store kv_request_id=" + id + " timed out after 60s without a fetch — failing 3 job(s)"}},
			s:     miss(71, 0.02), cause: event.CauseUnbound, timer: &event.Timer{Name: TimerUnbound, Value: 60 * time.Second}},
		{name: "the sim's source failed the transfer after its stall",
			lines: []line{{27.8, true, "WARNING [p2p] KV load for " + id + " from " + peer + " failed (transfer failed at the source): recomputing locally"}},
			s:     miss(21.9, 5.9), cause: event.CauseSourceFailed},
		{name: "a fetch refused for a store reaped unbound is the reap's",
			lines: []line{
				{70.0, false, "WARNING [p2p] P2P 127.0.0.1:7000: unbound store kv_request_id=" + id + " timed out after 60.0s without a fetch — failing 3 block(s)"},
				{71.01, true, "WARNING [p2p] KV load for " + id + " from " + peer + " failed (transfer failed at the source): recomputing locally"},
			},
			s: miss(71, 0.02), cause: event.CauseUnbound, timer: &event.Timer{Name: TimerUnbound, Value: 60 * time.Second}},
		{name: "the pull timeout", s: timeout, cause: event.CausePullTimeout, timer: &event.Timer{Name: TimerPull, Value: time.Minute}},
		{name: "the pull timeout while the body was read", s: bodyCut, cause: event.CausePullTimeout, timer: &event.Timer{Name: TimerPull, Value: time.Minute}},
		{name: "an error answer", s: failed, cause: event.CauseError},
		{name: "a refused pull", s: refused, cause: event.CauseError},
		{name: "cut short by the run's end", s: aborted, cause: event.CauseRunEnd},
		{name: "a load timeout ending in an error is the load timeout",
			lines: []line{{45.0, true, "WARNING 12-01 23:15:33 [client.py:401] P2PSession " + peer + ": " + id + " timed out, sending abort"}},
			s: func() event.Sample {
				s := miss(15, 30.1)
				s.Status, s.Err = 500, "POST http://127.0.0.1:8000/v1/completions: 500: KV load failed"
				return s
			}(), cause: event.CauseLoadTimeout, timer: &event.Timer{Name: TimerLoad, Value: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(Config{AtOnce: 2 * time.Second, PullTimeout: time.Minute})
			for _, l := range tt.lines {
				tr.Log(sec(l.at), l.decoder, l.text)
			}
			c, tm := tr.Of(tt.s)
			if c != tt.cause {
				t.Fatalf("cause %q, want %q", c, tt.cause)
			}
			if (tm == nil) != (tt.timer == nil) || tm != nil && *tm != *tt.timer {
				t.Fatalf("timer %+v, want %+v", tm, tt.timer)
			}
		})
	}
}

// TestUnmatchedLinesAreUnknown feeds a slow miss lines that look like
// evidence but do not bear on it: the cause is unknown, never the nearest
// mechanism.
func TestUnmatchedLinesAreUnknown(t *testing.T) {
	lines := []line{
		// Another peer's reap, at the right instant.
		{22.0, true, "WARNING [p2p] P2P 127.0.0.1:7000: peer " + other + " down: heartbeat timed out after 10.0s"},
		// The right peer, but reaped long before the pull ended.
		{14.0, true, "WARNING [p2p] P2P 127.0.0.1:7000: peer " + peer + " down: heartbeat timed out after 10.0s"},
		// The right peer, reaped before the pull started.
		{10.5, true, "WARNING [manager.py:611] P2P decoder-0: peer " + peer + " down"},
		// A source's reap of the decoder, naming the pull's peer text.
		{22.0, false, "WARNING [manager.py:611] P2P source-0: peer " + peer + " down"},
		// Another request's load timeout.
		{22.0, true, "WARNING [client.py:401] P2PSession " + peer + ": 0000-other timed out, sending abort"},
		// A still-down summary and a line vLLM does not print.
		{22.0, true, "WARNING [p2p] peer " + peer + " still down: 5 connects refused in the last 10.0s"},
		{22.0, true, "INFO [p2p] peer " + peer + " connected"},
	}
	tr := New(Config{AtOnce: 2 * time.Second, PullTimeout: time.Minute})
	for _, l := range lines {
		tr.Log(sec(l.at), l.decoder, l.text)
	}
	s := miss(11, 11.01)
	if c, tm := tr.Of(s); c != event.CauseUnknown || tm != nil {
		t.Fatalf("cause %q timer %+v, want unknown and no timer", c, tm)
	}
	// The same pull with no id and no peer: nothing can be matched.
	s.KVRequestID, s.Peer = "", ""
	if c, _ := tr.Of(s); c != event.CauseUnknown {
		t.Fatalf("cause %q without id or peer, want unknown", c)
	}
}

// TestForgetDropsOldLines: a line read before the horizon no longer
// explains a pull.
func TestForgetDropsOldLines(t *testing.T) {
	tr := New(Config{AtOnce: 2 * time.Second})
	tr.Log(sec(22), true, "P2P 127.0.0.1:7000: peer "+peer+" down: heartbeat timed out after 10.0s")
	s := miss(11, 11.01)
	if c, _ := tr.Of(s); c != event.CauseHeartbeat {
		t.Fatalf("before Forget: %q, want heartbeat", c)
	}
	tr.Forget(sec(30))
	if c, _ := tr.Of(s); c != event.CauseUnknown {
		t.Fatalf("after Forget: %q, want unknown", c)
	}
}
