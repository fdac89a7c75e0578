package link

import (
	"net"
	"testing"
	"time"

	"p2pfault/sim/engine"
)

func TestRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := New(a), New(b)
	t.Cleanup(func() { ca.Close(); cb.Close() })
	msgs := []Msg{
		{Type: TypeSubmit, ID: 7, Tokens: []int32{1, 2, 131071}, CacheSalt: "s", MaxTokens: 3,
			Source: &engine.RemoteSource{KVRequestID: "k", Host: "127.0.0.1", Port: 7777}},
		{Type: TypeResult, ID: 7, CachedTokens: 384, Stats: engine.Stats{PromptTokens: 400, P2PReadBytes: 12 << 20}},
		{Type: TypeReady, P2PID: "127.0.0.1:7777"},
	}
	for _, m := range msgs {
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range msgs {
		got, err := cb.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != want.Type || got.ID != want.ID || len(got.Tokens) != len(want.Tokens) ||
			got.CachedTokens != want.CachedTokens || got.Stats != want.Stats || got.P2PID != want.P2PID ||
			(want.Source != nil && (got.Source == nil || *got.Source != *want.Source)) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}

func TestSendDoesNotBlockOnAStuckPeer(t *testing.T) {
	a, b := net.Pipe() // unbuffered: nobody reads b
	c := New(a)
	t.Cleanup(func() { c.Close(); b.Close() })
	done := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			if err := c.Send(Msg{Type: TypeResult, ID: uint64(i)}); err != nil {
				t.Error(err)
				break
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Send blocked while the peer did not read")
	}
}

func TestSendAfterCloseFails(t *testing.T) {
	a, b := net.Pipe()
	c := New(a)
	b.Close()
	c.Close()
	if err := c.Send(Msg{Type: TypeCancel, ID: 1}); err == nil {
		t.Error("Send on a closed link succeeded")
	}
}
