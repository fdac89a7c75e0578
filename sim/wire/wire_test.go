package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func allMessages() []Message {
	k := KeysOf([]uint64{0, 1, 1 << 63, ^uint64(0)})
	return []Message{
		{Type: TypeConnect, PeerID: "127.0.0.1:7779", AgentMetadata: []byte("p2pfault-sim data=inline"), NumBlocks: 1600,
			BlockLen: 4 << 20, Fingerprint: "model=m block_size=128", HashSeed: "42"},
		{Type: TypeConnectAck, PeerID: "127.0.0.1:7777"},
		{Type: TypeDisconnect},
		{Type: TypeLookup, KVRequestID: "k#1", Keys: k, RoundSeq: 3},
		{Type: TypeLookupResp, KVRequestID: "k#1", Keys: k[:3], Hits: []bool{true, true, false}},
		{Type: TypeFetch, KVRequestID: "k#1", Keys: k[:1], BlockIndexes: []int64{7}, RoundSeq: 3},
		{Type: TypeFetch, KVRequestID: "k#1"}, // the empty fetch that ends the lookup phase
		{Type: TypeTransferDone, KVRequestID: "k#1", Success: true, RoundSeq: 3, Bytes: 12 << 20, Data: []uint64{1, 1 << 40}},
		{Type: TypeAbortFetch, KVRequestID: "k#1", RoundSeq: 1},
		{Type: TypeAbortAck, KVRequestID: "k#1", RoundSeq: 1},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range allMessages() {
		t.Run(m.Type, func(t *testing.T) {
			p, err := Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("got %+v, want %+v", got, m)
			}
		})
	}
}

// TestEncodeIsPlainMsgpack: what Encode writes is the map vLLM's msgspec
// decodes: string keys, keys and agent_metadata as bin (Python bytes).
func TestEncodeIsPlainMsgpack(t *testing.T) {
	p, err := Encode(Message{Type: TypeLookup, KVRequestID: "k", Keys: KeysOf([]uint64{5}), RoundSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := msgpack.Unmarshal(p, &got); err != nil {
		t.Fatal(err)
	}
	key := append([]byte{0, 0, 0, 0, 0, 0, 0, 5}, make([]byte, KeyLen-8)...)
	want := map[string]any{"type": "lookup", "kv_request_id": "k", "keys": []any{key}, "round_seq": int8(2)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

// TestDecodesAPeerOfAnotherMake: a peer's message in the older dialect
// (block_hashes, no round_seq), with fields the sim does not know and a
// key that is no sim hash, decodes; the key comes back byte for byte.
func TestDecodesAPeerOfAnotherMake(t *testing.T) {
	foreign := bytes.Repeat([]byte{0xab}, KeyLen)
	p := payload(t, map[string]any{
		"type": "lookup", "kv_request_id": "x", "block_hashes": [][]byte{foreign},
		"source_epoch": bytes.Repeat([]byte{1}, 16), "wire_major": 1, "nested": map[string]any{"a": []any{1, "b", map[string]any{}}},
	})
	m, err := Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Keys) != 1 || string(m.Keys[0]) != string(foreign) || m.RoundSeq != 0 {
		t.Fatalf("got %+v", m)
	}
	if m.Keys[0].Hash() != 0xabababababababab {
		t.Errorf("hash %x", m.Keys[0].Hash())
	}
}

func payload(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeRejects(t *testing.T) {
	key := string(KeyOf(1))
	tests := []struct {
		name    string
		p       func(t *testing.T) []byte
		wantErr string
		wantEOF bool
	}{
		{"an empty payload", func(*testing.T) []byte { return nil }, "empty payload", true},
		{"a payload that is not a map", func(t *testing.T) []byte { return payload(t, []int{1}) }, "not a msgpack map", false},
		{"a map claiming more entries than bytes", func(*testing.T) []byte { return []byte{0x8f, 0xa0} }, "map of 15 entries in 1 bytes", false},
		{"no type", func(t *testing.T) []byte { return payload(t, map[string]any{"peer_id": "x"}) }, "missing field type", false},
		{"an unknown type", func(t *testing.T) []byte { return payload(t, map[string]any{"type": "hello"}) }, `unknown type "hello"`, false},
		{"a missing field", func(t *testing.T) []byte { return payload(t, map[string]any{"type": "lookup", "kv_request_id": "k"}) }, "decode lookup: missing field keys", false},
		{"a field of the wrong kind", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "lookup", "kv_request_id": "k", "keys": "abc"})
		}, "field keys: want array", false},
		{"a key too short for a hash", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "lookup", "kv_request_id": "k", "keys": [][]byte{{1, 2}}})
		}, "key of 2 bytes", false},
		{"a negative round_seq", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "abort_fetch", "kv_request_id": "k", "round_seq": -1})
		}, "-1 is negative", false},
		{"hits and keys of other lengths", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "lookup_resp", "kv_request_id": "k", "keys": []string{key}, "hits": []bool{}})
		}, "keys/hits length mismatch: 1 vs 0", false},
		{"a hit that is not a bool", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "lookup_resp", "kv_request_id": "k", "keys": []string{key}, "hits": []int{1}})
		}, "hits: element 0: want bool", false},
		{"a fetch without an index per key", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "fetch", "kv_request_id": "k", "keys": []string{key}, "block_indexes": []int{}})
		}, "keys/block_indexes length mismatch", false},
		{"a non-positive block_len", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "connect", "peer_id": "p", "agent_metadata": []byte{}, "base_addr": 0, "num_blocks": 1, "block_len": 0})
		}, "block_len: expected positive int, got 0", false},
		{"an array claiming more elements than bytes", func(*testing.T) []byte {
			return append([]byte{0x82, 0xa4, 't', 'y', 'p', 'e', 0xa6, 'l', 'o', 'o', 'k', 'u', 'p', 0xa4, 'k', 'e', 'y', 's', 0xdd}, 0xff, 0xff, 0xff, 0xff)
		}, "array of 4294967295 entries", false},
		{"an unknown field claiming more values than bytes", func(*testing.T) []byte {
			return []byte{0x81, 0xa1, 'x', 0xdf, 0xff, 0xff, 0xff, 0xff}
		}, "container of", false},
		{"trailing bytes after the map", func(t *testing.T) []byte {
			return append(payload(t, map[string]any{"type": "disconnect"}), 0xc0)
		}, "1 trailing bytes", false},
		{"a duplicate field", func(*testing.T) []byte {
			return []byte{0x82, 0xa4, 't', 'y', 'p', 'e', 0xa4, 'p', 'i', 'n', 'g', 0xa4, 't', 'y', 'p', 'e', 0xa4, 'p', 'o', 'n', 'g'}
		}, `duplicate field "type"`, false},
		{"a string cut short", func(*testing.T) []byte { return []byte{0x81, 0xa4, 't', 'y'} }, "want string", true},
		{"an oversize payload", func(*testing.T) []byte { return make([]byte, MaxMessageLen+1) }, "over max", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.p(t))
			if err == nil {
				t.Fatal("decoded a bad payload")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q lacks %q", err, tt.wantErr)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) != tt.wantEOF {
				t.Errorf("error %q: is ErrUnexpectedEOF %v, want %v", err, !tt.wantEOF, tt.wantEOF)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	if _, err := Encode(Message{Type: "nope"}); err == nil || !strings.Contains(err.Error(), `unknown type "nope"`) {
		t.Errorf("got %v", err)
	}
	if _, err := Encode(Message{Type: TypeFetch, KVRequestID: "k", Keys: KeysOf([]uint64{1})}); err == nil ||
		!strings.Contains(err.Error(), "1 keys but 0 block indexes") {
		t.Errorf("a fetch without indexes: %v", err)
	}
	hashes := make([]uint64, MaxMessageLen/KeyLen)
	if _, err := Encode(Message{Type: TypeLookup, KVRequestID: "k", Keys: KeysOf(hashes)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an oversize lookup encoded: %v", err)
	}
}

// FuzzDecode: any bytes decode to a message or an error, never a panic,
// and what decodes re-encodes to a payload that decodes the same.
func FuzzDecode(f *testing.F) {
	for _, m := range allMessages() {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x81, 0xa1, 'x', 0x91, 0x91, 0x91})
	f.Add([]byte{0x81, 0xa1, 'x', 0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		re, err := Encode(m)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", m, err)
		}
		m2, err := Decode(re)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode: %+v vs %+v (%v)", m, m2, err)
		}
	})
}

func benchHashes(n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
	}
	return k
}

// benchExchange encodes and decodes req and the answer made from it, as
// the two engines of a pull do; wireB/op is both payloads' bytes.
func benchExchange(b *testing.B, req Message, answer func(Message) Message) {
	b.ReportAllocs()
	var n int
	for i := 0; i < b.N; i++ {
		p, err := Encode(req)
		if err != nil {
			b.Fatal(err)
		}
		m, err := Decode(p)
		if err != nil {
			b.Fatal(err)
		}
		Hashes(m.Keys)
		r, err := Encode(answer(m))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(r); err != nil {
			b.Fatal(err)
		}
		n = len(p) + len(r)
	}
	b.ReportMetric(float64(n), "wireB/op")
}

// BenchmarkLookupRoundTrip: a lookup of 40 keys (a 640-token prompt in
// 16-token blocks) and its lookup_resp, which echoes the keys.
func BenchmarkLookupRoundTrip(b *testing.B) {
	hits := make([]bool, 40)
	benchExchange(b, Message{Type: TypeLookup, KVRequestID: "cmpl-bench#1", Keys: KeysOf(benchHashes(40))},
		func(m Message) Message {
			return Message{Type: TypeLookupResp, KVRequestID: m.KVRequestID, Keys: m.Keys, Hits: hits}
		})
}

// BenchmarkFetch384: a fetch of 384 tokens (3 blocks of 128) and its
// transfer_done with the blocks' content.
func BenchmarkFetch384(b *testing.B) {
	benchExchange(b, Message{Type: TypeFetch, KVRequestID: "cmpl-bench#1", Keys: KeysOf(benchHashes(3)), BlockIndexes: []int64{0, 1, 2}},
		func(m Message) Message {
			return Message{Type: TypeTransferDone, KVRequestID: m.KVRequestID, Success: true, Bytes: 3 << 22, Data: benchHashes(3)}
		})
}

func TestPeekAndRewritePeerID(t *testing.T) {
	for _, m := range allMessages() {
		p, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Peek(p)
		if err != nil {
			t.Fatalf("peek %s: %v", m.Type, err)
		}
		hits := 0
		for _, h := range m.Hits {
			if h {
				hits++
			}
		}
		want := Summary{Type: m.Type, PeerID: m.PeerID, KVRequestID: m.KVRequestID, Keys: len(m.Keys), Hits: hits, Bytes: m.Bytes}
		if s != want {
			t.Errorf("peek %s = %+v, want %+v", m.Type, s, want)
		}
		out, ok := RewritePeerID(p, m.PeerID, "10.0.0.9:40001")
		if m.PeerID == "" {
			if ok {
				t.Errorf("%s: rewrote a peer_id it does not carry", m.Type)
			}
			continue
		}
		back, err := Decode(out)
		if !ok || err != nil {
			t.Fatalf("%s: rewrite ok=%v, decode: %v", m.Type, ok, err)
		}
		m.PeerID = "10.0.0.9:40001"
		if !reflect.DeepEqual(back, m) {
			t.Errorf("%s rewritten = %+v, want %+v", m.Type, back, m)
		}
		if _, ok := RewritePeerID(p, "other:1", "x:2"); ok {
			t.Errorf("%s: rewrote a peer_id that is not the one named", m.Type)
		}
	}
	if _, err := Peek([]byte{0x91, 0x01}); err == nil {
		t.Error("peek of an array: no error")
	}
}
