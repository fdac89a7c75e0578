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
	return []Message{
		{Type: TypeConnect, PeerID: "127.0.0.1:7779", Fingerprint: "model=m block_size=128", HashSeed: "42", BlockLen: 4 << 20},
		{Type: TypeConnectAck, PeerID: "127.0.0.1:7777"},
		{Type: TypeConnectReject, Reason: "hash seed mismatch from 127.0.0.1:7779: remote='7', local='42'", PeerID: "127.0.0.1:7777", Fingerprint: "fp", HashSeed: "42", BlockLen: 4096},
		{Type: TypeLookup, KVRequestID: "k#1", Keys: []uint64{0, 1, 1 << 63, ^uint64(0)}},
		{Type: TypeLookupResp, KVRequestID: "k#1", Hits: []bool{true, true, false}},
		{Type: TypeFetch, KVRequestID: "k#1", Keys: []uint64{42}},
		{Type: TypeTransferDone, KVRequestID: "k#1", Success: true, Bytes: 12 << 20},
		{Type: TypeAbortFetch, KVRequestID: "k#1"},
		{Type: TypeAbortAck, KVRequestID: "k#1"},
		{Type: TypePing}, {Type: TypePong}, {Type: TypeDisconnect},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range allMessages() {
		t.Run(m.Type, func(t *testing.T) {
			f, err := Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			got, n, err := DecodeFrame(append(f, 0xff)) // a following frame's byte is not consumed
			if err != nil {
				t.Fatal(err)
			}
			if n != len(f) {
				t.Errorf("consumed %d bytes, frame is %d", n, len(f))
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("got %+v, want %+v", got, m)
			}
			p, err := ReadFrame(bytes.NewReader(f))
			if err != nil || !bytes.Equal(p, f[HeaderLen:]) {
				t.Errorf("ReadFrame: %v", err)
			}
		})
	}
}

// payload builds a frame whose payload is v marshalled by msgpack.
func payload(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	f, err := AppendFrame(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDecodeFrameRejects(t *testing.T) {
	tests := []struct {
		name    string
		frame   func(t *testing.T) []byte
		wantErr string
		wantEOF bool
	}{
		{"a short header", func(*testing.T) []byte { return []byte{0, 0} }, "frame header", true},
		{"a short payload", func(*testing.T) []byte { return []byte{0, 0, 0, 9, 0x80} }, "have 1 of 9 bytes", true},
		{"a length over the max", func(*testing.T) []byte { return []byte{0x7f, 0, 0, 0} }, "over max", false},
		{"a payload that is not a map", func(t *testing.T) []byte { return payload(t, []int{1}) }, "not a msgpack map", false},
		{"an empty payload", func(*testing.T) []byte { return []byte{0, 0, 0, 0} }, "empty payload", true},
		{"no type", func(t *testing.T) []byte { return payload(t, map[string]any{"peer_id": "x"}) }, "missing field type", false},
		{"an unknown type", func(t *testing.T) []byte { return payload(t, map[string]any{"type": "hello"}) }, `unknown type "hello"`, false},
		{"an unknown field", func(t *testing.T) []byte { return payload(t, map[string]any{"type": "ping", "x": 1}) }, `unknown field "x"`, false},
		{"a field of another type's", func(t *testing.T) []byte { return payload(t, map[string]any{"type": "ping", "reason": "r"}) }, "decode ping: unexpected field reason", false},
		{"a missing field", func(t *testing.T) []byte { return payload(t, map[string]any{"type": "lookup", "kv_request_id": "k"}) }, "decode lookup: missing field keys", false},
		{"a field of the wrong kind", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "lookup", "kv_request_id": "k", "keys": "abc"})
		}, "field keys: want array", false},
		{"a negative key", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "fetch", "kv_request_id": "k", "keys": []int{-1}})
		}, "key -1 is negative", false},
		{"a hit that is not a bool", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "lookup_resp", "kv_request_id": "k", "hits": []int{1}})
		}, "hits: element 0: want bool", false},
		{"a non-positive block_len", func(t *testing.T) []byte {
			return payload(t, map[string]any{"type": "connect", "peer_id": "p", "fingerprint": "f", "hash_seed": "1", "block_len": 0})
		}, "block_len 0 is not positive", false},
		{"an array claiming more elements than bytes", func(*testing.T) []byte {
			// {"keys": array32 of 2^32-1 elements}
			p := append([]byte{0x81, 0xa4, 'k', 'e', 'y', 's', 0xdd}, 0xff, 0xff, 0xff, 0xff)
			f, _ := AppendFrame(nil, p)
			return f
		}, "elements in a", false},
		{"a map claiming more entries than bytes", func(*testing.T) []byte {
			f, _ := AppendFrame(nil, []byte{0xdf, 0xff, 0xff, 0xff, 0xff})
			return f
		}, "entries in", false},
		{"trailing bytes after the map", func(t *testing.T) []byte {
			b, _ := msgpack.Marshal(map[string]any{"type": "ping"})
			f, _ := AppendFrame(nil, append(b, 0xc0))
			return f
		}, "1 trailing bytes", false},
		{"a duplicate field", func(*testing.T) []byte {
			p := []byte{0x82, 0xa4, 't', 'y', 'p', 'e', 0xa4, 'p', 'i', 'n', 'g', 0xa4, 't', 'y', 'p', 'e', 0xa4, 'p', 'o', 'n', 'g'}
			f, _ := AppendFrame(nil, p)
			return f
		}, `duplicate field "type"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeFrame(tt.frame(t))
			if err == nil {
				t.Fatal("decoded a bad frame")
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

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{"clean end between frames", nil, io.EOF},
		{"end inside the header", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"end inside the payload", []byte{0, 0, 0, 4, 1}, io.ErrUnexpectedEOF},
		{"a length over the max", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	if _, err := Encode(Message{Type: "nope"}); err == nil || !strings.Contains(err.Error(), `unknown type "nope"`) {
		t.Errorf("got %v", err)
	}
	keys := make([]uint64, MaxFrameLen/8) // 9 bytes each on the wire
	for i := range keys {
		keys[i] = ^uint64(0)
	}
	if _, err := Encode(Message{Type: TypeLookup, KVRequestID: "k", Keys: keys}); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("an oversize lookup encoded: %v", err)
	}
}

// FuzzDecodeFrame: any bytes decode to a message or an error, never a
// panic, and what decodes re-encodes to a frame that decodes the same.
func FuzzDecodeFrame(f *testing.F) {
	for _, m := range allMessages() {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 5, 0x81, 0xa1, 'x', 0x91, 0x91})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := DecodeFrame(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if n < HeaderLen || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		re, err := Encode(m)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", m, err)
		}
		m2, _, err := DecodeFrame(re)
		if err != nil || !reflect.DeepEqual(normalize(m), normalize(m2)) {
			t.Fatalf("re-decode: %+v vs %+v (%v)", m, m2, err)
		}
	})
}

// normalize treats an empty slice and nil alike.
func normalize(m Message) Message {
	if len(m.Keys) == 0 {
		m.Keys = nil
	}
	if len(m.Hits) == 0 {
		m.Hits = nil
	}
	return m
}
