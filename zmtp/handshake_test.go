package zmtp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// rawPeer plays the other end of nc from bytes: it sends greeting, then
// READY with props (unless ready is nil), reading whatever comes.
func rawPeer(nc net.Conn, greeting, ready []byte) {
	go io.Copy(io.Discard, nc)
	go func() {
		nc.Write(greeting)
		if ready != nil {
			nc.Write(appendFrame(nil, ready, flagCommand))
		}
	}()
}

func readyOf(kv ...string) []byte { return appendMetadata([]byte("\x05READY"), kv...) }

// TestHandshake: a ZMTP 3.0 peer is accepted, names its identity and
// type; a peer that cannot talk to us is refused with an error naming
// why: an old version, another mechanism, an incompatible socket type, an
// ERROR, a message before READY, or silence past HandshakeIvl.
func TestHandshake(t *testing.T) {
	v30 := appendGreeting(nil)
	v30[11] = 0
	v20 := appendGreeting(nil)
	v20[10] = 2
	plain := appendGreeting(nil)
	copy(plain[mechanismOff:], "PLAIN")
	cases := []struct {
		name            string
		greeting, ready []byte
		want            string // "" accepts
	}{
		{"3.0 peer", v30, readyOf("Socket-Type", "ROUTER", "Identity", "r1"), ""},
		{"3.1 DEALER", appendGreeting(nil), readyOf("socket-type", "DEALER"), ""},
		{"ZMTP 2.0", v20, nil, "ZMTP 2.1"},
		{"PLAIN", plain, nil, `mechanism "PLAIN"`},
		{"not ZMTP", []byte("GET / HTTP/1.1\r\n\r\n"), nil, "not ZMTP 3's"},
		{"PUB peer", appendGreeting(nil), readyOf("Socket-Type", "PUB"), `socket type "PUB"`},
		{"ERROR", appendGreeting(nil), []byte("\x05ERROR\x0cno thank you"), `ERROR: "no thank you"`},
		{"truncated property", appendGreeting(nil), []byte("\x05READY\x0bSocket-Type\x00\x00\x01\x00"), "value of 256 bytes"},
		{"silent", appendGreeting(nil), nil, "handshake interval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer b.Close()
			rawPeer(b, tc.greeting, tc.ready)
			c, err := NewConn(a, TypeDealer, Options{HandshakeIvl: 200 * time.Millisecond})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer c.Close()
				if tc.name == "3.0 peer" && (string(c.PeerIdentity()) != "r1" || c.PeerType() != TypeRouter) {
					t.Fatalf("peer %q %s", c.PeerIdentity(), c.PeerType())
				}
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("accepted; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if tc.name != "silent" && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
		})
	}
}

// TestPingAnswered: a PING's context comes back in the PONG (truncated
// to 16 bytes, as libzmq does).
func TestPingAnswered(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	pong := make(chan string, 1)
	go func() {
		defer close(pong)
		var g [greetingLen]byte
		io.ReadFull(b, g[:])
		b.Write(appendGreeting(nil))
		br := bufio.NewReader(b)
		readFrame(br, 1<<10) // our READY
		b.Write(appendFrame(nil, readyOf("Socket-Type", "ROUTER"), flagCommand))
		b.Write(appendCommand(nil, "PING", append(pingData(time.Second), "0123456789abcdefXYZ"...)))
		for {
			f, err := readFrame(br, 1<<10)
			if err != nil {
				return
			}
			if cmd, _ := parseCommand(f.body); f.command && cmd.name == "PONG" {
				pong <- string(cmd.data)
				return
			}
		}
	}()
	c, err := NewConn(a, TypeDealer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case got := <-pong:
		if got != "0123456789abcdef" {
			t.Fatalf("PONG context %q, want the PING's first 16 bytes", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no PONG")
	}
}
