package engine

import (
	"strings"
	"testing"
	"time"

	"p2pfault/internal/zmqpeer"
	"p2pfault/sim/kv"
	"p2pfault/sim/wire"
)

// The engine against real libzmq: zmqpeer.py (Debian's python3-zmq and
// python3-msgpack) lays its sockets out as vLLM's control/zmq.py and
// speaks vLLM's messages (session/protocol.py @0577fc22) by hand. Run
// with -v for the transcript: every message both ways, with identities
// ("zmqpeer <-" is what the test has the peer send, "zmqpeer ->" what it
// received and from whom).

// vllmHeartbeats are control/zmq.py's socket options, on the engine too.
func vllmHeartbeats(c *Config) {
	c.HeartbeatInterval, c.HeartbeatTimeout = 2*time.Second, 10*time.Second
}

// keyList is keys as the peer sends them: bytes values.
func keyList(keys []wire.Key) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = zmqpeer.Bytes([]byte(k))
	}
	return out
}

// connectOf is a connect as vLLM's session sends it (_send_connect), from
// the peer named id, matching e unless blockLen says otherwise.
func connectOf(id string, e *Engine, blockLen int64) map[string]any {
	return map[string]any{
		"type": "connect", "peer_id": id, "agent_metadata": zmqpeer.Bytes([]byte("nixl-agent-of-" + id)),
		"base_addr": 0, "num_blocks": 64, "block_len": blockLen,
		"config_fingerprint": e.fingerprint, "hash_seed": e.cfg.HashSeed,
	}
}

// from accepts a message of type typ received from identity id.
func from(id, typ string) func(zmqpeer.Event) bool {
	return func(e zmqpeer.Event) bool { return e.Ev == "recv" && e.From == id && e.Field("type") == typ }
}

// TestLibzmqClientOfASimSource: a libzmq peer, as vLLM's decoder, opens a
// session to a sim source: the handshake both ways, a lookup answered
// with hits for the blocks the source holds and misses for the others,
// the fetch's transfer_done, and an abort_fetch's abort_ack; every reply
// comes from the source's identity over the source's own DEALER.
func TestLibzmqClientOfASimSource(t *testing.T) {
	peer := zmqpeer.Start(t, zmqpeer.Options{})
	src := startEngine(t, vllmHeartbeats)
	toks := prompt("libzmq source", 40)
	run(t, src, Request{Tokens: toks, MaxTokens: 1})
	held := kv.BlockHashes(src.cfg.HashSeed, "", toks, src.cfg.BlockSize)
	if len(held) == 0 {
		t.Fatal("the seeded prompt has no full block")
	}
	const wait = 5 * time.Second

	peer.Send(src.ID(), connectOf(peer.Addr, src.Engine, src.blockBytes))
	c := peer.Await(wait, from(src.ID(), wire.TypeConnect))
	if c.Field("peer_id") != src.ID() || c.Field("block_len") != float64(src.blockBytes) {
		t.Errorf("the source's own connect: %s", c.Line)
	}
	ack := peer.Await(wait, from(src.ID(), wire.TypeConnectAck))
	if ack.Field("peer_id") != src.ID() {
		t.Errorf("connect_ack: %s", ack.Line)
	}
	peer.Send(src.ID(), map[string]any{"type": "connect_ack", "peer_id": peer.Addr})

	// Lookup: the held blocks, then two the source never saw.
	keys := append(wire.KeysOf(held), wire.KeyOf(1), wire.KeyOf(2))
	peer.Send(src.ID(), map[string]any{"type": "lookup", "kv_request_id": "k1", "keys": keyList(keys), "round_seq": 0})
	resp := peer.Await(wait, from(src.ID(), wire.TypeLookupResp))
	hits, _ := resp.Field("hits").([]any)
	if len(hits) != len(keys) {
		t.Fatalf("lookup_resp: %d hits for %d keys: %s", len(hits), len(keys), resp.Line)
	}
	for i, h := range hits {
		if want := i < len(held); h != want {
			t.Errorf("lookup_resp hit %d = %v, want %v", i, h, want)
		}
	}
	if m, _ := wire.Decode(resp.RawBytes()); len(m.Keys) != len(keys) || m.Keys[0] != keys[0] || m.Keys[len(keys)-1] != keys[len(keys)-1] {
		t.Errorf("lookup_resp does not echo the keys: %s", resp.Line)
	}

	idx := make([]any, len(held))
	for i := range idx {
		idx[i] = i
	}
	peer.Send(src.ID(), map[string]any{"type": "fetch", "kv_request_id": "k1", "keys": keyList(wire.KeysOf(held)), "block_indexes": idx, "round_seq": 1})
	done := peer.Await(wait, from(src.ID(), wire.TypeTransferDone))
	if done.Field("success") != true || done.Field("kv_request_id") != "k1" || done.Field("round_seq") != float64(1) {
		t.Errorf("transfer_done: %s", done.Line)
	}

	peer.Send(src.ID(), map[string]any{"type": "abort_fetch", "kv_request_id": "k2", "round_seq": 4})
	ab := peer.Await(wait, from(src.ID(), wire.TypeAbortAck))
	if ab.Field("kv_request_id") != "k2" || ab.Field("round_seq") != float64(4) {
		t.Errorf("abort_ack: %s", ab.Line)
	}
	if l := src.log.String(); !strings.Contains(l, "accepted connect from "+peer.Addr) {
		t.Errorf("source log lacks the accepted connect:\n%s", l)
	}
}

// TestLibzmqServerToASimDecoder: a sim decoder's pull names a libzmq peer
// as its source: the decoder's connect arrives at the peer's ROUTER with
// the decoder's identity, the peer's replies go over the DEALER the peer
// opens back to that identity (the second connection), and the decoder
// acks the peer's connect and sends its lookup; a miss prefills locally.
func TestLibzmqServerToASimDecoder(t *testing.T) {
	peer := zmqpeer.Start(t, zmqpeer.Options{})
	dec := startEngine(t, vllmHeartbeats)
	host, port := splitID(peer.Addr)
	toks := prompt("libzmq decoder", 40)
	res := runAsync(dec, Request{Tokens: toks, MaxTokens: 1, Source: &RemoteSource{KVRequestID: "pull-1", Host: host, Port: port}})
	const wait = 5 * time.Second

	c := peer.Await(wait, from(dec.ID(), wire.TypeConnect))
	if c.Identity != "" && c.Identity != dec.ID() || c.Field("peer_id") != dec.ID() {
		t.Errorf("the decoder's connect: %s", c.Line)
	}
	peer.Send(dec.ID(), connectOf(peer.Addr, dec.Engine, dec.blockBytes))
	peer.Send(dec.ID(), map[string]any{"type": "connect_ack", "peer_id": peer.Addr})
	ack := peer.Await(wait, from(dec.ID(), wire.TypeConnectAck))
	if ack.Field("peer_id") != dec.ID() {
		t.Errorf("the decoder's connect_ack: %s", ack.Line)
	}
	lk := peer.Await(wait, from(dec.ID(), wire.TypeLookup))
	m, err := wire.Decode(lk.RawBytes())
	if err != nil || m.KVRequestID == "" || len(m.Keys) == 0 || len(m.Keys[0]) != wire.KeyLen {
		t.Fatalf("the decoder's lookup: %v: %s", err, lk.Line)
	}
	hits := make([]any, len(m.Keys))
	for i := range hits {
		hits[i] = false
	}
	peer.Send(dec.ID(), map[string]any{"type": "lookup_resp", "kv_request_id": m.KVRequestID, "keys": keyList(m.Keys), "hits": hits})
	peer.Await(wait, from(dec.ID(), wire.TypeFetch)) // the empty fetch that ends the lookup phase
	select {
	case o := <-res:
		if o.res.Err != nil || o.res.CachedTokens != 0 {
			t.Errorf("the pull: %+v, want a local prefill", o.res)
		}
	case <-time.After(wait):
		t.Fatal("the pull did not end after its lookup missed")
	}
	if l := dec.log.String(); !strings.Contains(l, "peer "+peer.Addr+" connected") {
		t.Errorf("decoder log lacks the ready session:\n%s", l)
	}
}

// TestLibzmqConnectWithAnotherBlockLenIsRejected: a libzmq peer's connect
// with another block_len gets the source's own connect (sent before it
// validates, as vLLM's session) and no connect_ack; the source logs
// vLLM's line.
func TestLibzmqConnectWithAnotherBlockLenIsRejected(t *testing.T) {
	peer := zmqpeer.Start(t, zmqpeer.Options{})
	src := startEngine(t, vllmHeartbeats)
	peer.Send(src.ID(), connectOf(peer.Addr, src.Engine, 2*src.blockBytes))
	peer.Await(5*time.Second, from(src.ID(), wire.TypeConnect))
	want := "P2PSession " + peer.Addr + ": rejecting peer connect: block_len mismatch from " + peer.Addr
	waitFor(t, "the source's rejection", func() bool { return strings.Contains(src.log.String(), want) })
	// Nothing more comes: no connect_ack. Probe with a lookup; the source
	// ignores it too (no session).
	peer.Send(src.ID(), map[string]any{"type": "lookup", "kv_request_id": "k", "keys": []any{}, "round_seq": 0})
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, l := range peer.Lines() {
			if strings.Contains(l, `"connect_ack"`) || strings.Contains(l, `"lookup_resp"`) {
				t.Fatalf("the rejected peer was answered: %s", l)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
