package relay

import (
	"testing"
	"time"

	"p2pfault/internal/zmqpeer"
	"p2pfault/sim/wire"
)

// from accepts a message of type typ received from identity id.
func from(id, typ string) func(zmqpeer.Event) bool {
	return func(e zmqpeer.Event) bool { return e.Ev == "recv" && e.From == id && e.Field("type") == typ }
}

// TestRealLibzmqPeersThroughTheLink: two libzmq peers laid out as vLLM's
// control/zmq.py, a decoder and a source, talk through the link on the
// OS's loopback: each sees the other's stand-in as identity and peer_id,
// messages pass both ways, and the heartbeats of every connection cross
// it (the link answers none). Run with -v for the transcript.
func TestRealLibzmqPeersThroughTheLink(t *testing.T) {
	hb := zmqpeer.Options{HeartbeatIvl: 100 * time.Millisecond, HeartbeatTimeout: time.Second, HeartbeatTTL: time.Second}
	dec, src := zmqpeer.Start(t, hb), zmqpeer.Start(t, hb)
	l, err := New(Config{Name: "dec>src", Decoder: dec.Addr, Source: src.Addr, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	const wait = 10 * time.Second
	key := zmqpeer.Bytes([]byte(wire.KeyOf(7)))

	dec.Send(l.SourceAddr(), map[string]any{"type": "connect", "peer_id": dec.Addr, "agent_metadata": zmqpeer.Bytes([]byte("nixl")),
		"base_addr": 0, "num_blocks": 64, "block_len": 4096, "config_fingerprint": "f", "hash_seed": "42"})
	c := src.Await(wait, from(l.DecoderAddr(), wire.TypeConnect))
	if c.Field("peer_id") != l.DecoderAddr() || c.Field("block_len") != float64(4096) {
		t.Errorf("the decoder's connect as the source got it: %s", c.Line)
	}
	// The source replies over a DEALER of its own to the identity it saw.
	src.Send(l.DecoderAddr(), map[string]any{"type": "connect_ack", "peer_id": src.Addr})
	ack := dec.Await(wait, from(l.SourceAddr(), wire.TypeConnectAck))
	if ack.Field("peer_id") != l.SourceAddr() {
		t.Errorf("the source's connect_ack as the decoder got it: %s", ack.Line)
	}
	dec.Send(l.SourceAddr(), map[string]any{"type": "lookup", "kv_request_id": "k1", "keys": []any{key}, "round_seq": 0})
	src.Await(wait, from(l.DecoderAddr(), wire.TypeLookup))
	src.Send(l.DecoderAddr(), map[string]any{"type": "lookup_resp", "kv_request_id": "k1", "keys": []any{key}, "hits": []any{true}})
	resp := dec.Await(wait, from(l.SourceAddr(), wire.TypeLookupResp))
	if hits, _ := resp.Field("hits").([]any); len(hits) != 1 || hits[0] != true {
		t.Errorf("lookup_resp as the decoder got it: %s", resp.Line)
	}
	time.Sleep(time.Second) // ten heartbeat intervals
	cn := l.Counters()
	t.Logf("counters: %d connections, heartbeats %v, messages %v", cn.Conns, cn.Heartbeats, cn.Messages)
	if cn.Conns != 2 {
		t.Errorf("%d connections relayed, want 2 (a DEALER each way)", cn.Conns)
	}
	// Every connection carries PINGs from both ends and their PONGs.
	if cn.Heartbeats[ToSource] < 10 || cn.Heartbeats[ToDecoder] < 10 {
		t.Errorf("heartbeats relayed %v, want ten or more each way in a second at 100 ms", cn.Heartbeats)
	}
	if cn.Of(ToDecoder, wire.TypeLookupResp).Passed != 1 || cn.Of(ToSource, wire.TypeLookup).Passed != 1 {
		t.Errorf("messages %v", cn.Messages)
	}
}
