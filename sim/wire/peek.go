package wire

import (
	"errors"
	"fmt"
)

// Summary is what a relay reads of a message without decoding it whole
// (package relay's trace and faults): its type, transaction and counts.
type Summary struct {
	Type        string
	KVRequestID string
	PeerID      string
	Keys        int // keys (or an older peer's block_hashes)
	Hits        int // lookup_resp: the hits that are true
	// Bytes: transfer_done's bytes, the sim's data plane carried inline
	// (vLLM sends none: its blocks move over NIXL).
	Bytes int64
}

// Peek reads the top-level fields of p a relay needs and skips every
// other, so a peer's message of any dialect is summarized as long as it is
// a msgpack map with a string type; an error otherwise (the relay then
// forwards it untouched).
func Peek(p []byte) (Summary, error) {
	var s Summary
	err := walk(p, func(key string, r *reader) error {
		var err error
		switch key {
		case "type":
			s.Type, err = r.str()
		case "kv_request_id":
			s.KVRequestID, err = r.str()
		case "peer_id":
			s.PeerID, err = r.str()
		case "keys", "block_hashes":
			s.Keys, err = r.arrayLen()
			for i := 0; err == nil && i < s.Keys; i++ {
				err = r.skip()
			}
		case "bytes":
			s.Bytes, err = r.nonNeg()
		case "hits":
			var n int
			n, err = r.arrayLen()
			for i := 0; err == nil && i < n; i++ {
				var h bool
				if h, err = r.bool(); h {
					s.Hits++
				}
			}
		default:
			err = r.skip()
		}
		return err
	})
	if err == nil && s.Type == "" {
		err = errors.New("peek message: no type")
	}
	return s, err
}

// RewritePeerID returns p with its top-level peer_id replaced by to when
// it is from, every other byte as it came; ok is false (and p returned)
// when p has no peer_id equal to from or does not parse.
func RewritePeerID(p []byte, from, to string) (out []byte, ok bool) {
	start, end := -1, -1
	err := walk(p, func(key string, r *reader) error {
		if key != "peer_id" {
			return r.skip()
		}
		at := r.i
		v, err := r.str()
		if err == nil && v == from {
			start, end = at, r.i
		}
		return err
	})
	if err != nil || start < 0 {
		return p, false
	}
	e := encoder{b: make([]byte, 0, len(p)+len(to)-len(from)+4)}
	e.b = append(e.b, p[:start]...)
	e.str(to)
	e.b = append(e.b, p[end:]...)
	return e.b, true
}

// walk calls field for each entry of p's top-level map with the reader at
// the entry's value, which field must consume.
func walk(p []byte, field func(key string, r *reader) error) error {
	if len(p) > MaxMessageLen {
		return fmt.Errorf("message: %d bytes over max %d: %w", len(p), MaxMessageLen, ErrTooLarge)
	}
	r := &reader{b: p}
	n, err := r.mapLen()
	if err != nil {
		return fmt.Errorf("message is not a msgpack map: %w", err)
	}
	for i := 0; i < n; i++ {
		key, err := r.str()
		if err != nil {
			return fmt.Errorf("entry %d: field name: %w", i, err)
		}
		if err := field(key, r); err != nil {
			return fmt.Errorf("field %s: %w", key, err)
		}
	}
	if r.left() != 0 {
		return fmt.Errorf("%d trailing bytes after the map", r.left())
	}
	return nil
}
