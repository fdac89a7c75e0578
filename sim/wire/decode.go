package wire

import (
	"errors"
	"fmt"
	"io"
)

// Decode decodes one message's payload. As vLLM's sessions do
// (protocol.py's validate), it checks the fields its type needs and
// ignores those it does not know; older peers' block_hashes are read as
// keys, and a missing round_seq is round 0. An error names what is wrong;
// the caller logs it and drops the message.
func Decode(p []byte) (Message, error) {
	if len(p) > MaxMessageLen {
		return Message{}, fmt.Errorf("decode message: %d bytes over max %d: %w", len(p), MaxMessageLen, ErrTooLarge)
	}
	if len(p) == 0 {
		return Message{}, fmt.Errorf("decode message: empty payload: %w", io.ErrUnexpectedEOF)
	}
	r := &reader{b: p}
	n, err := r.mapLen()
	if err != nil {
		return Message{}, fmt.Errorf("decode message: payload is not a msgpack map: %w", err)
	}
	var m Message
	var seen fieldSet
	for i := 0; i < n; i++ {
		key, err := r.str()
		if err != nil {
			return Message{}, fmt.Errorf("decode message: entry %d: field name: %w", i, err)
		}
		if key == "block_hashes" {
			key = "keys" // the dialect of protocol.py @281cb485
		}
		if !seen.add(key) {
			return Message{}, fmt.Errorf("decode message: duplicate field %q", key)
		}
		if err := decodeField(r, key, &m); err != nil {
			return Message{}, fmt.Errorf("decode message: field %s: %w", key, err)
		}
	}
	if r.left() != 0 {
		return Message{}, fmt.Errorf("decode message: %d trailing bytes after the map", r.left())
	}
	if !seen.has("type") {
		return Message{}, errors.New("decode message: missing field type")
	}
	if err := validate(m, seen); err != nil {
		return Message{}, fmt.Errorf("decode %s: %w", m.Type, err)
	}
	return m, nil
}

// optional are the fields a type may lack: those newer than a dialect
// vLLM still speaks (round_seq, hash_seed), or that only vLLM's checks
// read (config_fingerprint), and the sim's own on transfer_done.
var optional = map[string]bool{
	"round_seq": true, "hash_seed": true, "config_fingerprint": true,
	"bytes": true, "data": true,
}

func validate(m Message, seen fieldSet) error {
	names, ok := fieldsOf(m.Type)
	if !ok {
		return fmt.Errorf("unknown type %q", m.Type)
	}
	for _, n := range names {
		if !seen.has(n) && !optional[n] {
			return fmt.Errorf("missing field %s", n)
		}
	}
	switch m.Type {
	case TypeConnect:
		if m.NumBlocks <= 0 {
			return fmt.Errorf("num_blocks: expected positive int, got %d", m.NumBlocks)
		}
		if m.BlockLen <= 0 {
			return fmt.Errorf("block_len: expected positive int, got %d", m.BlockLen)
		}
	case TypeLookupResp:
		if len(m.Keys) != len(m.Hits) {
			return fmt.Errorf("keys/hits length mismatch: %d vs %d", len(m.Keys), len(m.Hits))
		}
	case TypeFetch:
		if len(m.Keys) != len(m.BlockIndexes) {
			return fmt.Errorf("keys/block_indexes length mismatch: %d vs %d", len(m.Keys), len(m.BlockIndexes))
		}
	}
	return nil
}

// known are the field names Decode reads, each a bit of a fieldSet.
var known = []string{"type", "peer_id", "agent_metadata", "base_addr", "num_blocks", "block_len",
	"config_fingerprint", "hash_seed", "kv_request_id", "round_seq", "success", "bytes", "keys",
	"block_indexes", "hits", "data"}

// fieldSet is the known fields a message carried; others are not kept.
type fieldSet uint32

func bit(name string) fieldSet {
	for i, k := range known {
		if k == name {
			return 1 << i
		}
	}
	return 0
}

// add marks name seen; false if it was already (an unknown one never is).
func (s *fieldSet) add(name string) bool {
	b := bit(name)
	if *s&b != 0 {
		return false
	}
	*s |= b
	return true
}

func (s fieldSet) has(name string) bool { return s&bit(name) != 0 }

func decodeField(r *reader, key string, m *Message) error {
	var err error
	switch key {
	case "type":
		m.Type, err = r.str()
	case "peer_id":
		m.PeerID, err = r.str()
	case "agent_metadata":
		m.AgentMetadata, err = r.bytes()
	case "base_addr":
		m.BaseAddr, err = r.nonNeg()
	case "num_blocks":
		m.NumBlocks, err = r.int()
	case "block_len":
		m.BlockLen, err = r.int()
	case "config_fingerprint":
		m.Fingerprint, err = r.str()
	case "hash_seed":
		m.HashSeed, err = r.str()
	case "kv_request_id":
		m.KVRequestID, err = r.str()
	case "round_seq":
		m.RoundSeq, err = r.nonNeg()
	case "success":
		m.Success, err = r.bool()
	case "bytes":
		m.Bytes, err = r.nonNeg()
	case "keys":
		m.Keys, err = decodeKeys(r)
	case "block_indexes":
		m.BlockIndexes, err = decodeArray(r, (*reader).nonNeg)
	case "hits":
		m.Hits, err = decodeArray(r, (*reader).bool)
	case "data":
		m.Data, err = decodeArray(r, (*reader).uint)
	default:
		err = r.skip() // a field of a newer dialect (epochs, wire version)
	}
	return err
}

func decodeArray[T any](r *reader, elem func(*reader) (T, error)) ([]T, error) {
	n, err := r.arrayLen()
	if err != nil || n == 0 {
		return nil, err // an empty array is nil, as the field is when unset
	}
	out := make([]T, n)
	for i := range out {
		if out[i], err = elem(r); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return out, nil
}

// decodeKeys copies the keys' bytes into one buffer, the keys slices of it.
func decodeKeys(r *reader) ([]Key, error) {
	n, err := r.arrayLen()
	if err != nil || n == 0 {
		return nil, err
	}
	buf := make([]byte, 0, n*KeyLen)
	ends := make([]int, n)
	for i := range ends {
		p, err := r.raw(true, "key bytes")
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		if len(p) < minKeyLen || len(p) > maxKeyLen {
			return nil, fmt.Errorf("element %d: key of %d bytes (an OffloadKey has %d)", i, len(p), KeyLen)
		}
		buf = append(buf, p...)
		ends[i] = len(buf)
	}
	return keysIn(buf, n, func(i int) (int, int) {
		if i == 0 {
			return 0, ends[0]
		}
		return ends[i-1], ends[i]
	}), nil
}
