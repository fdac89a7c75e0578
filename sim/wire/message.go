package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Message types on the control channel.
const (
	TypeConnect       = "connect"
	TypeConnectAck    = "connect_ack"
	TypeConnectReject = "connect_reject"
	TypeLookup        = "lookup"
	TypeLookupResp    = "lookup_resp"
	TypeFetch         = "fetch"
	TypeTransferDone  = "transfer_done"
	TypeAbortFetch    = "abort_fetch"
	TypeAbortAck      = "abort_ack"
	TypePing          = "ping"
	TypePong          = "pong"
	TypeDisconnect    = "disconnect"
)

// Message is one control message. Only the fields of its Type are sent;
// DecodeFrame rejects a frame that lacks one of them or carries another.
type Message struct {
	Type        string
	PeerID      string   // connect, connect_ack, connect_reject: the sender's "host:port" identity
	Fingerprint string   // connect, connect_reject: model, block size, TP size, KV bytes per token
	HashSeed    string   // connect, connect_reject: PYTHONHASHSEED of the sender
	BlockLen    int64    // connect, connect_reject: bytes per KV block
	Reason      string   // connect_reject
	KVRequestID string   // lookup .. abort_ack
	Keys        []uint64 // lookup, fetch: block hashes, in prompt order
	Hits        []bool   // lookup_resp: one per looked-up key
	Success     bool     // transfer_done
	Bytes       int64    // transfer_done: bytes written to the consumer
	// Data is transfer_done's simulated payload: the content digest of each
	// block written, in fetch order (the NIXL write of real vLLM, carried on
	// the control channel). Empty when the transfer failed.
	Data []uint64
}

// field is one bit per wire field, so a type's field set is a mask.
type field uint16

const (
	fType field = 1 << iota
	fPeerID
	fFingerprint
	fHashSeed
	fBlockLen
	fReason
	fKVRequestID
	fKeys
	fHits
	fSuccess
	fBytes
	fData
)

func (f field) name() string {
	switch f {
	case fType:
		return "type"
	case fPeerID:
		return "peer_id"
	case fFingerprint:
		return "fingerprint"
	case fHashSeed:
		return "hash_seed"
	case fBlockLen:
		return "block_len"
	case fReason:
		return "reason"
	case fKVRequestID:
		return "kv_request_id"
	case fKeys:
		return "keys"
	case fHits:
		return "hits"
	case fSuccess:
		return "success"
	case fBytes:
		return "bytes"
	case fData:
		return "data"
	}
	return fmt.Sprintf("field(%#x)", uint16(f))
}

func fieldByName(s string) (field, bool) {
	for f := fType; f <= fData; f <<= 1 {
		if f.name() == s {
			return f, true
		}
	}
	return 0, false
}

// fieldsOf is the exact field set of a message type (type included).
func fieldsOf(typ string) (field, bool) {
	switch typ {
	case TypeConnect:
		return fType | fPeerID | fFingerprint | fHashSeed | fBlockLen, true
	case TypeConnectAck:
		return fType | fPeerID, true
	case TypeConnectReject:
		// The producer's own connect fields ride on its reject (vLLM's
		// source sends a Connect of its own), so the consumer can name the
		// mismatch from its side.
		return fType | fReason | fPeerID | fFingerprint | fHashSeed | fBlockLen, true
	case TypeLookup, TypeFetch:
		return fType | fKVRequestID | fKeys, true
	case TypeLookupResp:
		return fType | fKVRequestID | fHits, true
	case TypeTransferDone:
		return fType | fKVRequestID | fSuccess | fBytes | fData, true
	case TypeAbortFetch, TypeAbortAck:
		return fType | fKVRequestID, true
	case TypePing, TypePong, TypeDisconnect:
		return fType, true
	}
	return 0, false
}

// Encode returns m as a frame (length prefix and payload).
func Encode(m Message) ([]byte, error) {
	set, ok := fieldsOf(m.Type)
	if !ok {
		return nil, fmt.Errorf("encode message: unknown type %q", m.Type)
	}
	var buf bytes.Buffer
	buf.Write(make([]byte, HeaderLen))
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(bits.OnesCount16(uint16(set))); err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.Type, err)
	}
	for f := fType; f <= fData; f <<= 1 {
		if set&f == 0 {
			continue
		}
		if err := encodeField(enc, f, m); err != nil {
			return nil, fmt.Errorf("encode %s field %s: %w", m.Type, f.name(), err)
		}
	}
	b := buf.Bytes()
	payload := len(b) - HeaderLen
	if payload > MaxFrameLen {
		return nil, fmt.Errorf("encode %s: %d bytes over max %d: %w", m.Type, payload, MaxFrameLen, ErrFrameTooLarge)
	}
	b[0], b[1], b[2], b[3] = byte(payload>>24), byte(payload>>16), byte(payload>>8), byte(payload)
	return b, nil
}

func encodeField(enc *msgpack.Encoder, f field, m Message) error {
	if err := enc.EncodeString(f.name()); err != nil {
		return err
	}
	switch f {
	case fType:
		return enc.EncodeString(m.Type)
	case fPeerID:
		return enc.EncodeString(m.PeerID)
	case fFingerprint:
		return enc.EncodeString(m.Fingerprint)
	case fHashSeed:
		return enc.EncodeString(m.HashSeed)
	case fBlockLen:
		return enc.EncodeInt(m.BlockLen)
	case fReason:
		return enc.EncodeString(m.Reason)
	case fKVRequestID:
		return enc.EncodeString(m.KVRequestID)
	case fKeys:
		return encodeUints(enc, m.Keys)
	case fData:
		return encodeUints(enc, m.Data)
	case fHits:
		if err := enc.EncodeArrayLen(len(m.Hits)); err != nil {
			return err
		}
		for _, h := range m.Hits {
			if err := enc.EncodeBool(h); err != nil {
				return err
			}
		}
		return nil
	case fSuccess:
		return enc.EncodeBool(m.Success)
	case fBytes:
		return enc.EncodeInt(m.Bytes)
	}
	return fmt.Errorf("no encoder for field %s", f.name())
}

func encodeUints(enc *msgpack.Encoder, vs []uint64) error {
	if err := enc.EncodeArrayLen(len(vs)); err != nil {
		return err
	}
	for _, v := range vs {
		if err := enc.EncodeUint(v); err != nil {
			return err
		}
	}
	return nil
}

// DecodeFrame decodes the frame at the start of b and returns its message
// and the number of bytes it took. An incomplete frame gives an error
// wrapping io.ErrUnexpectedEOF; anything else that is not a well-formed
// message gives an error naming what is wrong.
func DecodeFrame(b []byte) (Message, int, error) {
	payload, n, err := splitFrame(b)
	if err != nil {
		return Message{}, 0, err
	}
	m, err := DecodePayload(payload)
	if err != nil {
		return Message{}, 0, err
	}
	return m, n, nil
}

// DecodePayload decodes a frame's payload (what ReadFrame returns).
//
// It reads field by field with typed decoders and rejects unknown fields,
// so it never recurses into nested values: a hostile frame cannot make it
// allocate or recurse beyond the frame's own size.
func DecodePayload(p []byte) (Message, error) {
	r := bytes.NewReader(p)
	d := msgpack.NewDecoder(r)
	c, err := d.PeekCode()
	if err != nil {
		return Message{}, fmt.Errorf("decode message: empty payload: %w", io.ErrUnexpectedEOF)
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return Message{}, fmt.Errorf("decode message: payload is not a msgpack map (code 0x%02x)", c)
	}
	n, err := d.DecodeMapLen()
	if err != nil {
		return Message{}, fmt.Errorf("decode message: map header: %w", err)
	}
	// Each entry takes at least two bytes, so a larger count is a lie.
	if n > len(p)/2 {
		return Message{}, fmt.Errorf("decode message: map of %d entries in %d bytes", n, len(p))
	}
	var m Message
	var seen field
	for i := 0; i < n; i++ {
		key, err := decodeStr(d, "field name")
		if err != nil {
			return Message{}, fmt.Errorf("decode message: entry %d: %w", i, err)
		}
		f, ok := fieldByName(key)
		if !ok {
			return Message{}, fmt.Errorf("decode message: unknown field %q", key)
		}
		if seen&f != 0 {
			return Message{}, fmt.Errorf("decode message: duplicate field %q", key)
		}
		seen |= f
		if err := decodeField(d, f, &m, len(p)); err != nil {
			return Message{}, fmt.Errorf("decode message: field %s: %w", key, err)
		}
	}
	if r.Len() != 0 {
		return Message{}, fmt.Errorf("decode message: %d trailing bytes after the map", r.Len())
	}
	if seen&fType == 0 {
		return Message{}, errors.New("decode message: missing field type")
	}
	want, ok := fieldsOf(m.Type)
	if !ok {
		return Message{}, fmt.Errorf("decode message: unknown type %q", m.Type)
	}
	if missing := want &^ seen; missing != 0 {
		return Message{}, fmt.Errorf("decode %s: missing field %s", m.Type, lowest(missing).name())
	}
	if extra := seen &^ want; extra != 0 {
		return Message{}, fmt.Errorf("decode %s: unexpected field %s", m.Type, lowest(extra).name())
	}
	if m.Type == TypeConnect && m.BlockLen <= 0 {
		return Message{}, fmt.Errorf("decode connect: block_len %d is not positive", m.BlockLen)
	}
	if m.Type == TypeTransferDone && m.Bytes < 0 {
		return Message{}, fmt.Errorf("decode transfer_done: bytes %d is negative", m.Bytes)
	}
	return m, nil
}

func lowest(f field) field { return f & -f }

func decodeField(d *msgpack.Decoder, f field, m *Message, limit int) error {
	var err error
	switch f {
	case fType:
		m.Type, err = decodeStr(d, "string")
	case fPeerID:
		m.PeerID, err = decodeStr(d, "string")
	case fFingerprint:
		m.Fingerprint, err = decodeStr(d, "string")
	case fHashSeed:
		m.HashSeed, err = decodeStr(d, "string")
	case fReason:
		m.Reason, err = decodeStr(d, "string")
	case fKVRequestID:
		m.KVRequestID, err = decodeStr(d, "string")
	case fBlockLen:
		m.BlockLen, err = decodeInt(d)
	case fBytes:
		m.Bytes, err = decodeInt(d)
	case fSuccess:
		m.Success, err = decodeBool(d)
	case fKeys:
		m.Keys, err = decodeKeys(d, limit)
	case fData:
		m.Data, err = decodeKeys(d, limit)
	case fHits:
		m.Hits, err = decodeHits(d, limit)
	default:
		err = fmt.Errorf("no decoder for field %s", f.name())
	}
	return err
}

func decodeStr(d *msgpack.Decoder, what string) (string, error) {
	c, err := d.PeekCode()
	if err != nil {
		return "", fmt.Errorf("want %s: %w", what, io.ErrUnexpectedEOF)
	}
	if !msgpcode.IsString(c) {
		return "", fmt.Errorf("want %s, got msgpack code 0x%02x", what, c)
	}
	s, err := d.DecodeString()
	if err != nil {
		return "", fmt.Errorf("want %s: %w", what, err)
	}
	return s, nil
}

func isInt(c byte) bool {
	if msgpcode.IsFixedNum(c) {
		return true
	}
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return false
}

func decodeInt(d *msgpack.Decoder) (int64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, fmt.Errorf("want integer: %w", io.ErrUnexpectedEOF)
	}
	if !isInt(c) {
		return 0, fmt.Errorf("want integer, got msgpack code 0x%02x", c)
	}
	if c == msgpcode.Uint64 {
		u, err := d.DecodeUint64()
		if err != nil {
			return 0, fmt.Errorf("want integer: %w", err)
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("integer %d out of range", u)
		}
		return int64(u), nil
	}
	v, err := d.DecodeInt64()
	if err != nil {
		return 0, fmt.Errorf("want integer: %w", err)
	}
	return v, nil
}

func decodeBool(d *msgpack.Decoder) (bool, error) {
	c, err := d.PeekCode()
	if err != nil {
		return false, fmt.Errorf("want bool: %w", io.ErrUnexpectedEOF)
	}
	if c != msgpcode.True && c != msgpcode.False {
		return false, fmt.Errorf("want bool, got msgpack code 0x%02x", c)
	}
	return d.DecodeBool()
}

func decodeArrayLen(d *msgpack.Decoder, limit int) (int, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, fmt.Errorf("want array: %w", io.ErrUnexpectedEOF)
	}
	if !msgpcode.IsFixedArray(c) && c != msgpcode.Array16 && c != msgpcode.Array32 {
		return 0, fmt.Errorf("want array, got msgpack code 0x%02x", c)
	}
	n, err := d.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("want array: %w", err)
	}
	// Every element takes at least one byte of the payload.
	if n > limit {
		return 0, fmt.Errorf("array of %d elements in a %d-byte payload", n, limit)
	}
	return n, nil
}

func decodeKeys(d *msgpack.Decoder, limit int) ([]uint64, error) {
	n, err := decodeArrayLen(d, limit)
	if err != nil || n == 0 {
		return nil, err // an empty array is nil, as the field is when unset
	}
	keys := make([]uint64, n)
	for i := range keys {
		c, err := d.PeekCode()
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, io.ErrUnexpectedEOF)
		}
		if c == msgpcode.Uint64 {
			// Block hashes use the full 64 bits.
			if keys[i], err = d.DecodeUint64(); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			continue
		}
		v, err := decodeInt(d)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		if v < 0 {
			return nil, fmt.Errorf("element %d: key %d is negative", i, v)
		}
		keys[i] = uint64(v)
	}
	return keys, nil
}

func decodeHits(d *msgpack.Decoder, limit int) ([]bool, error) {
	n, err := decodeArrayLen(d, limit)
	if err != nil {
		return nil, err
	}
	hits := make([]bool, n)
	for i := range hits {
		if hits[i], err = decodeBool(d); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return hits, nil
}
