package cause

import (
	"fmt"
	"testing"

	"p2pfault/event"
)

// wireAt is one message through the link, seen at seconds since t0.
type wireAt struct {
	at  float64
	msg event.WireMsg
}

func toSource(typ, kv string) event.WireMsg {
	return event.WireMsg{Pair: "source-0", Peer: peer, Dir: event.WireToSource, Type: typ, KVRequestID: kv}
}

func toDecoder(typ, kv, verb string) event.WireMsg {
	return event.WireMsg{Pair: "source-0", Peer: peer, Dir: event.WireToDecoder, Type: typ, KVRequestID: kv, Verb: verb}
}

// TestCausesFromTheWireAlone feeds the tracker no engine line, as on
// --engine vllm (which logs neither the handshake wait nor an unanswered
// lookup), only the link's messages: a pull waiting on a connect whose
// connect_ack was withheld is named the handshake, one whose lookup got no
// lookup_resp the lookup deadline, a fetch with no transfer_done the load
// timeout, its abort never acked the abort-ack; the same pulls with their
// answers passing are not named so (they missed at once or are unknown).
func TestCausesFromTheWireAlone(t *testing.T) {
	wid := id + "#7" // the sim's wire id: the pull's with "#N"
	for _, tc := range []struct {
		name string
		msgs []wireAt
		s    event.Sample
		want event.Cause
	}{
		{"handshake: connect_ack withheld, the decoder gives up at its deadline", []wireAt{
			{10.01, toSource("connect", "")}, {10.02, toDecoder("connect_ack", "", "hold")},
			{40.01, toSource("disconnect", "")}, {40.5, toSource("connect", "")}, {40.51, toDecoder("connect_ack", "", "")},
		}, miss(12, 28.6), event.CauseHandshake},
		{"handshake: still unanswered at the pull's end", []wireAt{
			{10.01, toSource("connect", "")}, {10.02, toDecoder("connect_ack", "", "drop")},
		}, miss(10, 30), event.CauseHandshake},
		{"connect answered: the wire says nothing", []wireAt{
			{10.01, toSource("connect", "")}, {10.02, toDecoder("connect_ack", "", "")},
		}, miss(10, 30), event.CauseUnknown},
		{"lookup never answered", []wireAt{
			{10.01, toSource("lookup", wid)}, {10.02, toDecoder("lookup_resp", wid, "hold")},
		}, miss(10, 30), event.CauseLookupDeadline},
		{"lookup answered: missed at once", []wireAt{
			{10.01, toSource("lookup", wid)}, {10.02, toDecoder("lookup_resp", wid, "")},
		}, miss(10, 0.3), event.CauseLocal},
		{"another pull's lookup unanswered", []wireAt{
			{10.01, toSource("lookup", "other#1")}, {10.02, toDecoder("lookup_resp", "other#1", "hold")},
		}, miss(10, 30), event.CauseUnknown},
		{"fetch never done, abort acked", []wireAt{
			{10.01, toSource("lookup", wid)}, {10.02, toDecoder("lookup_resp", wid, "")},
			{10.03, toSource("fetch", wid)}, {10.04, toDecoder("transfer_done", wid, "drop")},
			{40.03, toSource("abort_fetch", wid)}, {40.04, toDecoder("abort_ack", wid, "")},
		}, miss(10, 30.1), event.CauseLoadTimeout},
		{"fetch never done, abort never acked", []wireAt{
			{10.03, toSource("fetch", wid)}, {10.04, toDecoder("transfer_done", wid, "drop")},
			{40.03, toSource("abort_fetch", wid)}, {40.04, toDecoder("abort_ack", wid, "drop")},
		}, miss(10, 40.1), event.CauseAbortAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Config{AtOnce: sec(2)})
			for _, m := range tc.msgs {
				tr.Wire(sec(m.at), m.msg)
			}
			if got, _ := tr.Of(tc.s); got != tc.want {
				t.Errorf("cause %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWireForget: what was answered before Forget's instant is let go, so
// the tracker's memory is what is open.
func TestWireForget(t *testing.T) {
	tr := New(Config{AtOnce: sec(2)})
	for i := range 100 {
		at := float64(i)
		kv := fmt.Sprintf("pull-%d#1", i)
		tr.Wire(sec(at), toSource("connect", ""))
		tr.Wire(sec(at+0.01), toDecoder("connect_ack", "", ""))
		tr.Wire(sec(at+0.02), toSource("lookup", kv))
		tr.Wire(sec(at+0.03), toDecoder("lookup_resp", kv, ""))
	}
	tr.Forget(sec(99.025))
	st := tr.wire[peer]
	if st == nil || len(st.connects) != 0 || len(st.byID) != 1 {
		t.Fatalf("after Forget: %+v, want no connect and one id (the last pull's)", st)
	}
}

// TestAgreeComparesOnlyWhatTheLinesNamed: pulls the run named from the
// wire (no line explained them) are counted apart, not compared; a pull
// the two name differently is a disagreement counted by pair.
func TestAgreeComparesOnlyWhatTheLinesNamed(t *testing.T) {
	lines := []event.Sample{{Cause: event.CauseP2P}, {Cause: event.CauseHandshake}, {Cause: event.CauseLookupDeadline}, {Cause: event.CauseHandshake, ByWire: true}}
	wire := []event.Sample{{Cause: event.CauseP2P}, {Cause: event.CauseHandshake}, {Cause: event.CauseUnknown}, {Cause: event.CauseHandshake}}
	g := Agree(lines, wire)
	if g.Pulls != 3 || g.Agree != 2 || g.Slow != 2 || g.SlowAgree != 1 || g.ByWire != 1 {
		t.Errorf("agreement %+v, want 2 of 3 pulls, 1 of 2 slow, 1 by the wire", g)
	}
	if n := g.Disagree[[2]event.Cause{event.CauseLookupDeadline, event.CauseUnknown}]; n != 1 || len(g.Disagree) != 1 {
		t.Errorf("disagreements %v, want lookup_deadline→unknown: 1", g.Disagree)
	}
}
