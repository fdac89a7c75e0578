package zmtp

import (
	"bufio"
	"bytes"
	"testing"
)

// TestRewriteReadyKeepsTheRest: a relay's READY names the stand-in
// identity and keeps every other property, in order; a frame read back
// is the frame written.
func TestRewriteReadyKeepsTheRest(t *testing.T) {
	body := appendMetadata([]byte{5, 'R', 'E', 'A', 'D', 'Y'}, "Socket-Type", "DEALER", "Identity", "10.0.0.1:7001", "X-Other", "v")
	out, err := RewriteReady(body, func(old []byte) []byte {
		if string(old) != "10.0.0.1:7001" {
			t.Errorf("identity handed to the rewrite: %q", old)
		}
		return []byte("127.0.0.1:40001")
	})
	if err != nil {
		t.Fatal(err)
	}
	want := appendMetadata([]byte{5, 'R', 'E', 'A', 'D', 'Y'}, "Socket-Type", "DEALER", "Identity", "127.0.0.1:40001", "X-Other", "v")
	if !bytes.Equal(out, want) {
		t.Fatalf("rewritten READY %q, want %q", out, want)
	}
	if _, err := RewriteReady(appendCommand(nil, "PING", nil)[2:], func(b []byte) []byte { return b }); err == nil {
		t.Error("a PING rewritten as a READY: no error")
	}
	var buf []byte
	for _, f := range []Frame{{Body: out, Command: true}, {Body: []byte("a"), More: true}, {Body: bytes.Repeat([]byte("b"), 300)}} {
		buf = AppendFrame(buf, f)
	}
	r := bufio.NewReader(bytes.NewReader(buf))
	for i, want := range []Frame{{Body: out, Command: true}, {Body: []byte("a"), More: true}, {Body: bytes.Repeat([]byte("b"), 300)}} {
		got, err := ReadFrame(r, 1<<20)
		if err != nil || !bytes.Equal(got.Body, want.Body) || got.More != want.More || got.Command != want.Command {
			t.Fatalf("frame %d read back as %+v (%v), want %+v", i, got, err, want)
		}
	}
	if CommandName(out) != "READY" || CommandName(nil) != "" {
		t.Errorf("CommandName: %q, %q", CommandName(out), CommandName(nil))
	}
}
