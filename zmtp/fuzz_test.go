package zmtp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// fuzzMax is the message limit the fuzz targets read with: small, so a
// declared size over it must be refused before anything is allocated.
const fuzzMax = 1 << 16

// FuzzGreeting: any bytes are a greeting or an error; a valid one is
// what appendGreeting writes, and nothing panics.
func FuzzGreeting(f *testing.F) {
	f.Add(appendGreeting(nil))
	g := appendGreeting(nil)
	g[11] = 0
	f.Add(g) // 3.0
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add(append([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1}, "PLAIN"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		minor, err := parseGreeting(b)
		if err == nil && (len(b) < greetingLen || b[0] != 0xff || b[10] < 3) {
			t.Fatalf("accepted %x (minor %d)", b, minor)
		}
		if err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("error %v is not a protocol error", err)
		}
	})
}

// FuzzFrames: any byte stream decodes to frames or ends in an error, and
// no frame body is over the limit; whatever decodes re-encodes to the same
// bytes (short and long sizes chosen as appendFrame chooses them).
func FuzzFrames(f *testing.F) {
	f.Add(appendMsg(nil, msg{parts: [][]byte{[]byte("id"), []byte("payload")}}))
	f.Add(appendFrame(nil, bytes.Repeat([]byte{'x'}, 300), 0))
	f.Add(appendCommand(nil, "PING", pingData(10*time.Second)))
	f.Add([]byte{0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x05, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		var re []byte
		for {
			fr, err := readFrame(r, fuzzMax)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("error %v", err)
				}
				break
			}
			if len(fr.body) > fuzzMax {
				t.Fatalf("frame of %d bytes over %d", len(fr.body), fuzzMax)
			}
			fl := byte(0)
			if fr.more {
				fl |= flagMore
			}
			if fr.command {
				fl |= flagCommand
				if _, err := parseCommand(fr.body); err == nil && fr.more {
					t.Fatal("a command with MORE decoded")
				}
			}
			re = appendFrame(re, fr.body, fl)
		}
		if !bytes.HasPrefix(b, re) && canonical(b) {
			t.Fatalf("re-encoded %x is not a prefix of %x", re, b)
		}
	})
}

// canonical reports whether b uses short sizes for bodies up to 255 bytes
// (a long size for a short body is valid ZMTP but re-encodes shorter).
func canonical(b []byte) bool {
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		fl, err := r.ReadByte()
		if err != nil {
			return true
		}
		if fl&flagLong == 0 {
			n, err := r.ReadByte()
			if err != nil {
				return true
			}
			if _, err := r.Discard(int(n)); err != nil {
				return true
			}
			continue
		}
		var s [8]byte
		if _, err := io.ReadFull(r, s[:]); err != nil {
			return true
		}
		n := uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 | uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
		if n <= 255 {
			return false
		}
		if n > fuzzMax {
			return true
		}
		if _, err := r.Discard(int(n)); err != nil {
			return true
		}
	}
}

// FuzzCommand: any command body parses or errors; READY metadata and a
// PING's TTL and context stay inside the body.
func FuzzCommand(f *testing.F) {
	f.Add(appendMetadata([]byte("\x05READY"), "Socket-Type", "DEALER", "Identity", "127.0.0.1:7777"))
	f.Add(append([]byte("\x04PING"), pingData(10*time.Second)...))
	f.Add([]byte("\x04PONG"))
	f.Add([]byte("\x05ERROR\x03bad"))
	f.Add([]byte("\x05READY\x0bSocket-Type\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		cmd, err := parseCommand(body)
		if err != nil {
			return
		}
		switch cmd.name {
		case "READY":
			md, err := parseMetadata(cmd.data)
			if err != nil {
				return
			}
			total := 0
			for k, v := range md {
				total += len(k) + len(v)
			}
			if total > len(cmd.data) {
				t.Fatalf("metadata of %d bytes from %d", total, len(cmd.data))
			}
		case "PING":
			ttl, ctx, err := parsePing(cmd.data)
			if err == nil && (len(ctx) > maxPingContext || ttl < 0 || ttl > 0xffff*100*time.Millisecond) {
				t.Fatalf("PING ttl %v context %d bytes", ttl, len(ctx))
			}
		}
	})
}

// FuzzConn: a peer that sends a valid greeting and READY and then any
// bytes never makes a connection panic or hold more than MaxMsgSize; the
// connection ends with an error or delivers messages.
func FuzzConn(f *testing.F) {
	f.Add(appendMsg(nil, msg{one: []byte("hello")}))
	f.Add(appendCommand(nil, "PING", append(pingData(time.Second), "ctx"...)))
	f.Add([]byte{0x03, 0xff})
	f.Add(appendCommand(nil, "ERROR", []byte("\x03bad")))
	f.Fuzz(func(t *testing.T, tail []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			// The peer: greeting, READY, the fuzzed bytes; it drains what
			// the connection writes so its writes never block.
			go io.Copy(io.Discard, b)
			b.Write(appendGreeting(nil))
			ready := appendMetadata([]byte("\x05READY"), "Socket-Type", "DEALER", "Identity", "x")
			b.Write(appendFrame(nil, ready, flagCommand))
			b.Write(tail)
			b.Close()
		}()
		c, err := NewConn(a, TypeRouter, Options{MaxMsgSize: fuzzMax, HandshakeIvl: 5 * time.Second})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		for {
			parts, err := c.ReadMsg(t.Context())
			if err != nil {
				return
			}
			size := 0
			for _, p := range parts {
				size += len(p)
			}
			if size > fuzzMax || len(parts) > maxFrames {
				t.Fatalf("message of %d parts, %d bytes", len(parts), size)
			}
		}
	})
}
