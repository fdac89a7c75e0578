package zmtp

import (
	"bufio"
	"encoding/binary"
	"strings"
)

// A relay (package relay) forwards a ZMTP stream frame by frame, so that
// heartbeats cross it as the peers sent them and a stopped peer's silence
// reaches the other side exactly; these are the pieces of the codec it
// needs, over the same code the sockets use.

// GreetingLen is the length of a ZMTP 3 greeting: a relay forwards it as
// its bytes arrive (libzmq sends the signature first and the rest only
// once the peer's signature came, so waiting for all 64 would deadlock).
const GreetingLen = greetingLen

// Frame is one frame as read off the wire.
type Frame struct {
	Body    []byte
	More    bool // another part of the same message follows
	Command bool // a command (READY, PING, PONG, ...), not a message part
}

// ReadFrame reads one frame whose body is at most max bytes.
func ReadFrame(r *bufio.Reader, max int) (Frame, error) {
	f, err := readFrame(r, max)
	return Frame{Body: f.body, More: f.more, Command: f.command}, err
}

// AppendFrame appends f as it goes on the wire.
func AppendFrame(dst []byte, f Frame) []byte {
	var fl byte
	if f.More {
		fl |= flagMore
	}
	if f.Command {
		fl |= flagCommand
	}
	return appendFrame(dst, f.Body, fl)
}

// CommandName is a command frame's name ("READY", "PING", "PONG"), or ""
// when the body is not a well-formed command.
func CommandName(body []byte) string {
	cmd, err := parseCommand(body)
	if err != nil {
		return ""
	}
	return cmd.name
}

// RewriteReady returns a READY command's body with its Identity property
// replaced by identity(old) (added when absent only if identity returns a
// value for nil), its other properties as they were, in their order.
func RewriteReady(body []byte, identity func(old []byte) []byte) ([]byte, error) {
	cmd, err := parseCommand(body)
	if err != nil {
		return nil, err
	}
	if cmd.name != "READY" {
		return nil, protoErr("command %q where READY was due", cmd.name)
	}
	out := append([]byte(nil), body[:1+len(cmd.name)]...)
	b, seen := cmd.data, false
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || len(b) < 1+n+4 {
			return nil, protoErr("READY property header truncated (%d bytes left)", len(b))
		}
		name := string(b[1 : 1+n])
		vn := binary.BigEndian.Uint32(b[1+n:])
		rest := b[1+n+4:]
		if uint64(vn) > uint64(len(rest)) {
			return nil, protoErr("READY property %q: value of %d bytes, %d left", name, vn, len(rest))
		}
		val := rest[:vn]
		if strings.EqualFold(name, "Identity") {
			val, seen = identity(val), true
		}
		out = appendMetadata(out, name, string(val))
		b = rest[vn:]
	}
	if !seen {
		if id := identity(nil); id != nil {
			out = appendMetadata(out, "Identity", string(id))
		}
	}
	return out, nil
}
