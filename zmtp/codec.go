package zmtp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The greeting (23/ZMTP §"Version Negotiation" and §"Authentication and
// Confidentiality"): signature (0xFF, 8 bytes of padding, 0x7F), version
// (major, minor), mechanism (20 bytes, NUL-padded), as-server (1 byte),
// filler (31 bytes).
const (
	greetingLen  = 64
	signatureLen = 10
	mechanismOff = 12
	mechanismLen = 20
)

// Frame flags (23/ZMTP §"Framing"): bits 7-3 are reserved and must be zero.
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	flagsKnown  = flagMore | flagLong | flagCommand
)

// maxFrames bounds the parts of one multipart message: with MaxMsgSize it
// bounds what a peer can make a reader hold (empty frames cost a slice
// header each). vLLM sends one part; 1024 leaves room for any relay.
const maxFrames = 1024

// maxPingContext is the longest PING context a PONG echoes (37/ZMTP:
// "up to 16 octets"; libzmq truncates longer ones).
const maxPingContext = 16

// ErrProtocol marks a greeting, frame or command this package cannot
// parse: the connection that sent it is closed.
var ErrProtocol = errors.New("zmtp protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// appendGreeting appends a ZMTP 3.1 greeting for the NULL mechanism. The
// padding is not significant; libzmq only checks byte 0 and bit 0 of
// byte 9 (zmtp_engine.cpp receive_greeting).
func appendGreeting(dst []byte) []byte {
	var g [greetingLen]byte
	g[0], g[9] = 0xff, 0x7f
	g[10], g[11] = 3, 1
	copy(g[mechanismOff:], "NULL")
	return append(dst, g[:]...)
}

// checkSignature validates the first signatureLen bytes of a greeting, so
// a peer that does not speak ZMTP 3 is refused before we wait for more.
func checkSignature(b []byte) error {
	if len(b) < signatureLen {
		return protoErr("greeting: %d of %d signature bytes", len(b), signatureLen)
	}
	if b[0] != 0xff || b[9]&0x01 == 0 {
		return protoErr("greeting: signature %x is not ZMTP 3's (ff ... 7f): an unversioned (ZMTP 1.0) peer or not ZMTP at all", b[:signatureLen])
	}
	return nil
}

// parseGreeting checks a whole greeting and returns the peer's minor
// version: 3.0 and 3.1 differ only in PING/PONG, which we send and answer
// either way (libzmq heartbeats a 3.0 peer too).
func parseGreeting(b []byte) (minor byte, err error) {
	if err := checkSignature(b); err != nil {
		return 0, err
	}
	if len(b) < greetingLen {
		return 0, protoErr("greeting: %d of %d bytes", len(b), greetingLen)
	}
	if b[10] < 3 {
		return 0, protoErr("greeting: peer speaks ZMTP %d.%d; only 3.x is supported", b[10], b[11])
	}
	mech := b[mechanismOff : mechanismOff+mechanismLen]
	if !bytes.Equal(mech, []byte("NULL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")) {
		return 0, protoErr("greeting: mechanism %q; only NULL is supported", strings.TrimRight(string(mech), "\x00"))
	}
	return b[11], nil
}

// appendFrame appends one frame: short size up to 255 bytes, long above.
func appendFrame(dst, body []byte, flags byte) []byte {
	if len(body) > 255 {
		dst = append(dst, flags|flagLong)
		dst = binary.BigEndian.AppendUint64(dst, uint64(len(body)))
	} else {
		dst = append(dst, flags, byte(len(body)))
	}
	return append(dst, body...)
}

// msg is one message: a single part in one (vLLM's case, with no slice
// to allocate), several in parts.
type msg struct {
	one   []byte
	parts [][]byte
}

// msgOf is a message of parts; ZMTP has no message of none.
func msgOf(parts [][]byte) (msg, error) {
	switch len(parts) {
	case 0:
		return msg{}, errors.New("zmtp: a message needs at least one part")
	case 1:
		return msg{one: parts[0]}, nil
	}
	return msg{parts: parts}, nil
}

func (m msg) all() [][]byte {
	if m.parts != nil {
		return m.parts
	}
	return [][]byte{m.one}
}

// appendMsg appends a message: MORE on every part but the last.
func appendMsg(dst []byte, m msg) []byte {
	if m.parts == nil {
		return appendFrame(dst, m.one, 0)
	}
	parts := m.parts
	for i, p := range parts {
		var fl byte
		if i < len(parts)-1 {
			fl = flagMore
		}
		dst = appendFrame(dst, p, fl)
	}
	return dst
}

// appendCommand appends a command frame: name size, name, data.
func appendCommand(dst []byte, name string, data []byte) []byte {
	body := make([]byte, 0, 1+len(name)+len(data))
	body = append(body, byte(len(name)))
	body = append(body, name...)
	body = append(body, data...)
	return appendFrame(dst, body, flagCommand)
}

// frame is one decoded frame.
type frame struct {
	body    []byte
	more    bool
	command bool
}

// readFrame reads one frame; max bounds its body. A body is allocated as
// its bytes arrive, so a large declared size on a short stream costs what
// was sent, not what was declared.
func readFrame(r *bufio.Reader, max int) (frame, error) {
	fl, err := r.ReadByte()
	if err != nil {
		return frame{}, err
	}
	if fl&^flagsKnown != 0 {
		return frame{}, protoErr("frame flags %#02x: reserved bits set", fl)
	}
	if fl&flagCommand != 0 && fl&flagMore != 0 {
		return frame{}, protoErr("frame flags %#02x: a command with MORE", fl)
	}
	var size uint64
	if fl&flagLong != 0 {
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return frame{}, unexpected(err)
		}
		size = binary.BigEndian.Uint64(b[:])
	} else {
		b, err := r.ReadByte()
		if err != nil {
			return frame{}, unexpected(err)
		}
		size = uint64(b)
	}
	if size > uint64(max) {
		return frame{}, protoErr("frame of %d bytes over the limit of %d", size, max)
	}
	body, err := readBody(r, int(size))
	if err != nil {
		return frame{}, unexpected(err)
	}
	return frame{body: body, more: fl&flagMore != 0, command: fl&flagCommand != 0}, nil
}

// readBody reads n bytes, growing the buffer only as bytes arrive above
// 64 KiB.
func readBody(r io.Reader, n int) ([]byte, error) {
	if n <= 64<<10 {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r, int64(n))
	if got < int64(n) && err == nil {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF: the
// peer went away mid-frame.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// command is a decoded command frame body.
type command struct {
	name string
	data []byte
}

func parseCommand(body []byte) (command, error) {
	if len(body) == 0 {
		return command{}, protoErr("empty command")
	}
	n := int(body[0])
	if n == 0 || len(body) < 1+n {
		return command{}, protoErr("command name of %d bytes in a %d-byte command", n, len(body))
	}
	return command{name: string(body[1 : 1+n]), data: body[1+n:]}, nil
}

// Metadata is the properties of a READY command, by name as sent. ZMTP
// property names are case-insensitive: use Get.
type Metadata map[string][]byte

// Get returns the property name, compared case-insensitively.
func (m Metadata) Get(name string) []byte {
	if v, ok := m[name]; ok {
		return v
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

// appendMetadata appends properties in the given order (23/ZMTP
// §"The READY command": name size, name, 4-byte value size, value).
func appendMetadata(dst []byte, kv ...string) []byte {
	for i := 0; i+1 < len(kv); i += 2 {
		dst = append(dst, byte(len(kv[i])))
		dst = append(dst, kv[i]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(kv[i+1])))
		dst = append(dst, kv[i+1]...)
	}
	return dst
}

func parseMetadata(b []byte) (Metadata, error) {
	m := Metadata{}
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || len(b) < 1+n+4 {
			return nil, protoErr("READY property header truncated (%d bytes left)", len(b))
		}
		name := string(b[1 : 1+n])
		b = b[1+n:]
		vn := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(vn) > uint64(len(b)) {
			return nil, protoErr("READY property %q: value of %d bytes, %d left", name, vn, len(b))
		}
		m[name] = b[:vn:vn]
		b = b[vn:]
	}
	return m, nil
}

// pingData is a PING's data: the TTL in deciseconds (37/ZMTP, libzmq's
// HEARTBEAT_TTL) and an empty context, as libzmq sends it.
func pingData(ttl time.Duration) []byte {
	ds := ttl / (100 * time.Millisecond)
	if ds > 0xffff {
		ds = 0xffff
	}
	return binary.BigEndian.AppendUint16(nil, uint16(ds))
}

// parsePing returns a PING's TTL and context (truncated to 16 bytes, as
// libzmq's process_heartbeat_message does).
func parsePing(data []byte) (time.Duration, []byte, error) {
	if len(data) < 2 {
		return 0, nil, protoErr("PING of %d bytes: no TTL", len(data))
	}
	ttl := time.Duration(binary.BigEndian.Uint16(data)) * 100 * time.Millisecond
	ctx := data[2:]
	if len(ctx) > maxPingContext {
		ctx = ctx[:maxPingContext]
	}
	return ttl, ctx, nil
}
