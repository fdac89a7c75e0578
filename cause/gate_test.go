package cause

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"p2pfault/event"
)

const (
	gatePeer    = "127.0.0.1:7777"
	gateDecoder = "P2P 127.0.0.1:7779"
)

// engaged is an Engagement fed the decoder's lines.
func engaged(lines ...string) *Engagement {
	g := NewEngagement()
	for _, l := range lines {
		g.Log(true, l)
	}
	return g
}

// Each gate cause, fed the evidence that produces it: the decoder's lines
// in vLLM's words (session.py's protocol error, the handshake deadline)
// or the sim's (its reap on a refused connect), p2pfault's own connect,
// the last seed, the decoder's counters.
func TestTheGateNamesEachCauseFromItsEvidence(t *testing.T) {
	refused := &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}
	counters := func(q, h, b float64) *Counters {
		return &Counters{ExtQueries: event.MetricOf(q), ExtHits: event.MetricOf(h), P2PReadBytes: event.MetricOf(b)}
	}
	tests := []struct {
		name  string
		lines []string
		ev    Evidence
		cause string
		words []string
	}{
		{"vLLM's decoder rejects a source with another hash seed",
			[]string{"ERROR 12-02 03:00:00 [session.py:412] P2PSession " + gatePeer + ": protocol error: malformed 'connect': hash seed mismatch from " + gatePeer +
				": remote='42', local='7'. Ensure PYTHONHASHSEED (if set) matches on all P2P peers. — disconnecting",
				"WARNING 12-02 03:00:00 [manager.py:300] " + gateDecoder + ": peer " + gatePeer + " down"},
			Evidence{Dialed: true}, GateRejected,
			[]string{"hash seed mismatch from " + gatePeer + ": remote='42', local='7'", "give every engine the same PYTHONHASHSEED"}},
		{"vLLM's newer line (session.py @0577fc22), as the sim logs it",
			[]string{"ERROR 12-02 03:00:00 [session.py:443] P2PSession " + gatePeer + ": rejecting peer connect: block_len mismatch from " + gatePeer + ": remote=4194304, local=2097152"},
			Evidence{}, GateRejected,
			[]string{"block_len mismatch from " + gatePeer + ": remote=4194304, local=2097152", "the same --block-size"}},
		{"a block size that differs is a block_len mismatch",
			[]string{"P2PSession " + gatePeer + ": protocol error: malformed 'connect': block_len mismatch from " + gatePeer + ": remote=4194304, local=2097152 — disconnecting"},
			Evidence{}, GateRejected,
			[]string{"block_len mismatch", "the same --block-size"}},
		{"an attached cluster's log is not seen: the processes' seeds differ",
			nil, Evidence{Dialed: true, Seeds: &Seeds{Source: "42", Decoder: "7"}, Decoder: counters(12800, 0, 0)}, GateHashSeed,
			[]string{"source-0 runs with PYTHONHASHSEED=42, the decoder with PYTHONHASHSEED=7", "give every engine the same PYTHONHASHSEED"}},
		{"one seed unset is a mismatch too",
			nil, Evidence{Dialed: true, Seeds: &Seeds{Source: "unset", Decoder: "7"}}, GateHashSeed,
			[]string{"PYTHONHASHSEED=unset"}},
		{"the same seeds say nothing: the counters speak",
			nil, Evidence{Dialed: true, Seeds: &Seeds{Source: "42", Decoder: "42"}, Decoder: counters(12800, 0, 0)}, GateMiss,
			[]string{"answered MISS"}},
		{"the sim's decoder logs a refused connect",
			[]string{gateDecoder + ": peer " + gatePeer + " down: connection refused",
				"peer " + gatePeer + " still down: 19 connects refused in the last 10.0s"},
			Evidence{Dialed: true, Dial: refused}, GateRefused,
			[]string{"connection refused on source-0's P2P port", "its connects to " + gatePeer + " refused (20 counted)", "nothing listens there"}},
		{"real vLLM retries a refused connect silently: p2pfault's own connect is refused",
			nil, Evidence{Dialed: true, Dial: fmt.Errorf("dial tcp %s: %w", gatePeer, refused)}, GateRefused,
			[]string{"p2pfault's own connect to " + gatePeer + " was refused"}},
		{"a port that accepts and never acks times the handshake out",
			[]string{"P2PSession " + gatePeer + ": handshake timed out after 30s — marking connection dead",
				"P2PSession " + gatePeer + ": handshake timed out after 30s — marking connection dead"},
			Evidence{Dialed: true}, GateHandshake,
			[]string{"timed out 2 times (VLLM_P2P_HANDSHAKE_TIMEOUT_S)", "never acknowledges a connect"}},
		{"seeds that fail never put the prompts on the source",
			nil, Evidence{Dialed: true, SeedErr: "status 404: model not found"}, GateSeedFailed,
			[]string{"the seeds on source-0 failed (status 404: model not found)"}},
		{"lookups answered MISS for prompts the source holds",
			nil, Evidence{Dialed: true, Decoder: counters(12800, 0, 0)}, GateMiss,
			[]string{"answered MISS", "rose by 12800 tokens, the hits by 0", "PYTHONHASHSEED, --block-size"}},
		{"P2P read bytes that never moved",
			nil, Evidence{Dialed: true, Decoder: counters(0, 0, 0)}, GateNoBytes,
			[]string{"no byte moved over P2P into the decoder", `tier="1:p2p"`}},
		{"the rejection comes first: a refused connect after it is the same break",
			[]string{"P2PSession " + gatePeer + ": protocol error: malformed 'connect': hash seed mismatch from " + gatePeer + ": remote='42', local='7'. Ensure PYTHONHASHSEED (if set) matches on all P2P peers. — disconnecting"},
			Evidence{Dialed: true, Dial: refused}, GateRejected, []string{"hash seed mismatch"}},
		{"lines of another peer, a dial that connected and counters that moved say nothing: unknown",
			[]string{"P2PSession 127.0.0.1:7778: protocol error: malformed 'connect': hash seed mismatch from 127.0.0.1:7778: remote='1', local='7' — disconnecting",
				gateDecoder + ": peer 127.0.0.1:7778 down: connection refused"},
			Evidence{Dialed: true, Decoder: counters(100, 100, 4096)}, GateUnknown,
			[]string{"cause unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := tt.ev
			ev.Source, ev.Peer = 0, gatePeer
			ev.Log = engaged(tt.lines...).Peer(gatePeer)
			c, words := Diagnose(ev)
			if c != tt.cause {
				t.Errorf("cause %q, want %q (%s)", c, tt.cause, words)
			}
			for _, w := range tt.words {
				if !strings.Contains(words, w) {
					t.Errorf("words lack %q:\n%s", w, words)
				}
			}
		})
	}
}

// A source's lines are not the decoder's: its protocol error names the
// decoder, and only the decoder's sessions bear on the pulls.
func TestTheGateReadsOnlyTheDecodersLines(t *testing.T) {
	g := NewEngagement()
	g.Log(false, "P2PSession "+gatePeer+": protocol error: malformed 'connect': hash seed mismatch from "+gatePeer+": remote='7', local='42' — disconnecting")
	if l := g.Peer(gatePeer); l != (PeerLog{}) {
		t.Fatalf("a source's line counted: %+v", l)
	}
}
