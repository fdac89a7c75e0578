package link

// A link message's frame: a 4-byte big-endian length, then the payload.
// (It was the P2P channel's too, before that moved onto ZMTP.)

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderLen is the size of a frame's length prefix.
const HeaderLen = 4

// MaxFrameLen bounds a frame's payload so a garbage length prefix cannot
// make a reader allocate gigabytes. A submit of the longest prompt the sim
// accepts (131072 tokens) is well under it.
const MaxFrameLen = 1 << 20

// ErrFrameTooLarge is returned for a length prefix over MaxFrameLen.
var ErrFrameTooLarge = errors.New("frame too large")

// AppendFrame appends payload to dst behind its length prefix.
func AppendFrame(dst, payload []byte) ([]byte, error) {
	if len(payload) > MaxFrameLen {
		return dst, fmt.Errorf("append frame of %d bytes (max %d): %w", len(payload), MaxFrameLen, ErrFrameTooLarge)
	}
	var hdr [HeaderLen]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	dst = append(dst, hdr[:]...)
	return append(dst, payload...), nil
}

// ReadFrame reads one frame from r and returns its payload. It returns
// io.EOF only when r ends cleanly between frames.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("read frame header: %w", err)
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameLen {
		return nil, fmt.Errorf("read frame: length %d over max %d: %w", n, MaxFrameLen, ErrFrameTooLarge)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read frame payload of %d bytes: %w", n, err)
	}
	return payload, nil
}
