package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"

	"p2pfault/runfolder"
)

// Compression is how events.jsonl is written: plain or zstd
// (`--events-compress zstd`, for long runs). Readers tell the two apart by
// content, not by name.
type Compression string

const (
	CompressNone Compression = ""
	CompressZstd Compression = "zstd"
)

// FileEventsZstd is events.jsonl written with zstd.
const FileEventsZstd = runfolder.EventsZstd

// ParseCompression reads --events-compress: "none" (or "") or "zstd".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return CompressNone, nil
	case string(CompressZstd):
		return CompressZstd, nil
	}
	return "", fmt.Errorf("want none or zstd")
}

// Path is the events file a run writing with c keeps in its folder dir
// (runfolder.EventsFile: events.jsonl or events.jsonl.zst).
func (c Compression) Path(dir string) string {
	return runfolder.EventsFile(dir, c == CompressZstd)
}

// zstdMagic starts every zstd frame (RFC 8878 §3.1.1).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// eventsReader returns what to read the lines of an events file from:
// r itself, or its zstd stream decoded when r starts with a zstd frame.
// A stream cut short by a crash decodes as far as its last whole block
// and then reads as io.ErrUnexpectedEOF (cutShort).
func eventsReader(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(zstdMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("read events: %w", err)
	}
	if !bytes.Equal(head, zstdMagic) {
		return br, func() {}, nil
	}
	// One goroutine decoding in order: blocks come out as soon as they
	// are whole, so a cut stream gives every complete event first.
	d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, nil, fmt.Errorf("read zstd events: %w", err)
	}
	return d, d.Close, nil
}

// cutShort reports whether a read error is a compressed stream ending
// mid-frame: what a crash leaves, like a plain file's cut last line.
func cutShort(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }

// zstdLog is the zstd encoder of an events log: each Flush ends a whole
// block, so the file holds every event flushed, decodable, even when the
// process dies before Close writes the frame's end.
func zstdLog(f *os.File) (*zstd.Encoder, error) {
	// Concurrency 1: the encoder writes when told (Flush), not from a
	// goroutine of its own; a 1 MiB window keeps its memory small. On a
	// run's events, flushed per burst, "better" gives ~6x against the
	// default level's ~5x, at a few hundred kB/s at most to compress.
	return zstd.NewWriter(f, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20),
		zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
}
