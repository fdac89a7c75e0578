// Package wire is the P2P tier's control messages as vLLM sends them: one
// msgpack map with a "type" key per ZMTP message (session/protocol.py,
// vllm-project/vllm @0577fc22: keys, round_seq and hash_seed). The sim's
// data plane rides on transfer_done in fields vLLM does not read (bytes,
// data); a peer ignores fields it does not know, and so does Decode.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// Message types on the control channel (protocol.py's TYPE of each class).
const (
	TypeConnect      = "connect"
	TypeConnectAck   = "connect_ack"
	TypeDisconnect   = "disconnect"
	TypeLookup       = "lookup"
	TypeLookupResp   = "lookup_resp"
	TypeFetch        = "fetch"
	TypeTransferDone = "transfer_done"
	TypeAbortFetch   = "abort_fetch"
	TypeAbortAck     = "abort_ack"
)

// MaxMessageLen bounds a message's payload so a garbage peer cannot make a
// reader allocate gigabytes. A lookup for the longest prompt the sim
// accepts (131072 tokens in 16-token blocks, 37 bytes a key) is under it.
const MaxMessageLen = 1 << 20

// ErrTooLarge is returned for a message over MaxMessageLen.
var ErrTooLarge = errors.New("message too large")

// Key is one block key as vLLM sends it: OffloadKey bytes, a 32-byte block
// hash then a 4-byte group index (kv_offload/base.py). The sim's block
// hashes are 64-bit: KeyOf puts one in the hash's first 8 bytes. A key is
// kept as the bytes that came, so a lookup_resp echoes a peer's keys
// exactly, whatever made them.
type Key string

// KeyLen is the length of an OffloadKey: hash and group index.
const KeyLen = 32 + 4

// minKeyLen and maxKeyLen bound the keys Decode accepts: a key must hold
// a sim hash's 8 bytes; longer than two OffloadKeys is garbage.
const (
	minKeyLen = 8
	maxKeyLen = 2 * KeyLen
)

// KeyOf is the key of the sim's block hash h, in KV group 0.
func KeyOf(h uint64) Key {
	var b [KeyLen]byte
	binary.BigEndian.PutUint64(b[:8], h)
	return Key(b[:])
}

// Hash is the sim's block hash a key carries (its first 8 bytes).
func (k Key) Hash() uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64([]byte(k[:8]))
}

// KeysOf returns the keys of hashes, in order, their bytes in one
// allocation.
func KeysOf(hashes []uint64) []Key {
	if len(hashes) == 0 {
		return nil
	}
	buf := make([]byte, len(hashes)*KeyLen)
	for i, h := range hashes {
		binary.BigEndian.PutUint64(buf[i*KeyLen:], h)
	}
	return keysIn(buf, len(hashes), func(i int) (int, int) { return i * KeyLen, (i + 1) * KeyLen })
}

// keysIn makes n keys of buf's bytes, key i being buf[span(i)], without
// copying: buf is never written again.
func keysIn(buf []byte, n int, span func(i int) (int, int)) []Key {
	keys := make([]Key, n)
	for i := range keys {
		from, to := span(i)
		if to > from {
			keys[i] = Key(unsafe.String(&buf[from], to-from))
		}
	}
	return keys
}

// Hashes returns the sim's hashes of keys, in order.
func Hashes(keys []Key) []uint64 {
	if len(keys) == 0 {
		return nil
	}
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = k.Hash()
	}
	return hs
}

// Message is one control message. Only the fields of its Type are sent.
type Message struct {
	Type string
	// connect, connect_ack: the sender's "host:port" identity.
	PeerID string
	// connect: where the sender's KV blocks are for the data plane. vLLM's
	// is NIXL agent metadata; the sim's names its own data channel
	// (AgentMetadata in the engine).
	AgentMetadata []byte
	BaseAddr      int64  // connect: the KV region's base address (0 in the sim)
	NumBlocks     int64  // connect: blocks in the KV region
	BlockLen      int64  // connect: bytes per KV block
	Fingerprint   string // connect: config_fingerprint
	HashSeed      string // connect: PYTHONHASHSEED of the sender
	KVRequestID   string // lookup .. abort_ack
	Keys          []Key  // lookup, lookup_resp, fetch
	// BlockIndexes are fetch's remote block indexes, one per key: where the
	// consumer wants each block written.
	BlockIndexes []int64
	RoundSeq     int64  // lookup, fetch, transfer_done, abort_fetch, abort_ack
	Hits         []bool // lookup_resp: one per key
	Success      bool   // transfer_done
	// Bytes and Data are the sim's data plane on transfer_done (vLLM's is
	// a NIXL write before it): the bytes written and the content digest of
	// each block, in fetch order; empty when the transfer failed.
	Bytes int64
	Data  []uint64
}

// fieldsOf names the wire fields of a message type, in the order Encode
// writes them (protocol.py's class attributes).
func fieldsOf(typ string) ([]string, bool) {
	switch typ {
	case TypeConnect:
		return []string{"peer_id", "agent_metadata", "base_addr", "num_blocks", "block_len", "config_fingerprint", "hash_seed"}, true
	case TypeConnectAck:
		return []string{"peer_id"}, true
	case TypeDisconnect:
		return nil, true
	case TypeLookup:
		return []string{"kv_request_id", "keys", "round_seq"}, true
	case TypeLookupResp:
		return []string{"kv_request_id", "keys", "hits"}, true
	case TypeFetch:
		return []string{"kv_request_id", "keys", "block_indexes", "round_seq"}, true
	case TypeTransferDone:
		return []string{"kv_request_id", "success", "round_seq", "bytes", "data"}, true
	case TypeAbortFetch, TypeAbortAck:
		return []string{"kv_request_id", "round_seq"}, true
	}
	return nil, false
}

// Encode returns m's payload: the msgpack map vLLM's msgspec would write.
func Encode(m Message) ([]byte, error) {
	names, ok := fieldsOf(m.Type)
	if !ok {
		return nil, fmt.Errorf("encode message: unknown type %q", m.Type)
	}
	if m.Type == TypeFetch && len(m.BlockIndexes) != len(m.Keys) {
		return nil, fmt.Errorf("encode fetch: %d keys but %d block indexes", len(m.Keys), len(m.BlockIndexes))
	}
	if m.Type == TypeLookupResp && len(m.Hits) != len(m.Keys) {
		return nil, fmt.Errorf("encode lookup_resp: %d keys but %d hits", len(m.Keys), len(m.Hits))
	}
	e := encoder{b: make([]byte, 0, 64+len(m.Keys)*(KeyLen+2)+len(m.Data)*9)}
	e.mapLen(len(names) + 1)
	e.str("type")
	e.str(m.Type)
	for _, n := range names {
		e.str(n)
		encodeField(&e, n, m)
	}
	if len(e.b) > MaxMessageLen {
		return nil, fmt.Errorf("encode %s: %d bytes over max %d: %w", m.Type, len(e.b), MaxMessageLen, ErrTooLarge)
	}
	return e.b, nil
}

func encodeField(e *encoder, name string, m Message) {
	switch name {
	case "peer_id":
		e.str(m.PeerID)
	case "agent_metadata":
		e.bin(m.AgentMetadata)
	case "base_addr":
		e.int(m.BaseAddr)
	case "num_blocks":
		e.int(m.NumBlocks)
	case "block_len":
		e.int(m.BlockLen)
	case "config_fingerprint":
		e.str(m.Fingerprint)
	case "hash_seed":
		e.str(m.HashSeed)
	case "kv_request_id":
		e.str(m.KVRequestID)
	case "keys":
		e.arrayLen(len(m.Keys))
		for _, k := range m.Keys {
			e.bin([]byte(k))
		}
	case "block_indexes":
		e.arrayLen(len(m.BlockIndexes))
		for _, i := range m.BlockIndexes {
			e.int(i)
		}
	case "round_seq":
		e.int(m.RoundSeq)
	case "hits":
		e.arrayLen(len(m.Hits))
		for _, h := range m.Hits {
			e.bool(h)
		}
	case "success":
		e.bool(m.Success)
	case "bytes":
		e.int(m.Bytes)
	case "data":
		e.arrayLen(len(m.Data))
		for _, d := range m.Data {
			e.uint(d)
		}
	}
}
