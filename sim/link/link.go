// Package link carries messages between the sim's HTTP front end and its
// engine-core child over a socketpair: length-prefixed msgpack, like the
// P2P channel's frames. Both ends are the same binary, so the messages are
// plain structs.
package link

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"p2pfault/sim/engine"
)

// Message types.
const (
	TypeSubmit   = "submit"   // front end → core: a request to run
	TypeCancel   = "cancel"   // front end → core: its client went away
	TypeReady    = "ready"    // core → front end: model loaded, P2P bound
	TypeFatal    = "fatal"    // core → front end: startup failed (Message says why)
	TypeResult   = "result"   // core → front end: a request finished
	TypeShutdown = "shutdown" // core → front end: stopping on a signal
	TypeToken    = "token"    // core → front end: token N of a streamed request was sampled
	TypeAborted  = "aborted"  // core → front end: a cancelled request was dropped (Stats, N tokens)
	TypeQueues   = "queues"   // core → front end: the scheduler's queue lengths changed (Queues)
	TypeDecoding = "decoding" // core → front end: a streamed request started decoding from KV (before its tokens)
)

// Result error kinds.
const (
	ErrKindLoad     = "load"     // a KV load failed under policy "fail"
	ErrKindShutdown = "shutdown" // the core stopped before the request ended
)

// Msg is one link message; only the fields of its Type are set.
type Msg struct {
	Type         string               `msgpack:"type"`
	ID           uint64               `msgpack:"id,omitempty"`
	Tokens       []int32              `msgpack:"tokens,omitempty"`
	CacheSalt    string               `msgpack:"cache_salt,omitempty"`
	MaxTokens    int                  `msgpack:"max_tokens,omitempty"`
	Source       *engine.RemoteSource `msgpack:"source,omitempty"`
	Decoder      string               `msgpack:"remote_decoder,omitempty"` // submit: park the blocks for this kv_request_id
	P2PID        string               `msgpack:"p2p_id,omitempty"`
	Message      string               `msgpack:"message,omitempty"`
	CachedTokens int                  `msgpack:"cached_tokens,omitempty"`
	Stats        engine.Stats         `msgpack:"stats"`
	ErrKind      string               `msgpack:"err_kind,omitempty"`
	Stream       bool                 `msgpack:"stream,omitempty"` // submit: send a token message per token
	N            int                  `msgpack:"n,omitempty"`      // token: its number from 1; aborted: tokens generated
	Queues       *engine.Queues       `msgpack:"queues,omitempty"`
	KV           uint64               `msgpack:"kv,omitempty"` // result, decoding: the digest of the KV decoded from (engine.Result.KV)
}

// Conn reads messages from and queues messages to one end of the link.
// Send never blocks: a frozen peer must not freeze the sender's loop (the
// core answers P2P while its front end is stopped).
type Conn struct {
	rw io.ReadWriteCloser
	br *bufio.Reader

	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]byte
	closing bool
	werr    error
	wdone   chan struct{}
}

// New starts the writer of a link over rw.
func New(rw io.ReadWriteCloser) *Conn {
	c := &Conn{rw: rw, br: bufio.NewReader(rw), wdone: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.writeLoop()
	return c
}

// Send queues m. It fails only when the link is closed or broken.
func (c *Conn) Send(m Msg) error {
	payload, err := msgpack.Marshal(&m)
	if err != nil {
		return fmt.Errorf("encode link %s: %w", m.Type, err)
	}
	frame, err := AppendFrame(nil, payload)
	if err != nil {
		return fmt.Errorf("link %s: %w", m.Type, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if c.closing {
		return errors.New("link closed")
	}
	c.queue = append(c.queue, frame)
	c.cond.Signal()
	return nil
}

func (c *Conn) writeLoop() {
	defer close(c.wdone)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closing {
			c.cond.Wait()
		}
		if len(c.queue) == 0 {
			c.mu.Unlock()
			return
		}
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		for _, f := range batch {
			if _, err := c.rw.Write(f); err != nil {
				c.mu.Lock()
				c.werr = fmt.Errorf("write link: %w", err)
				c.queue = nil
				c.mu.Unlock()
				return
			}
		}
	}
}

// Recv reads the next message.
func (c *Conn) Recv() (Msg, error) {
	payload, err := ReadFrame(c.br)
	if err != nil {
		return Msg{}, err
	}
	var m Msg
	if err := msgpack.Unmarshal(payload, &m); err != nil {
		return Msg{}, fmt.Errorf("decode link message: %w", err)
	}
	return m, nil
}

// Flush waits up to timeout until what is queued has been written (a
// frozen peer may never read it), then closes the link.
func (c *Conn) Flush(timeout time.Duration) error {
	c.mu.Lock()
	c.closing = true
	c.cond.Signal()
	c.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.wdone:
		return c.rw.Close()
	case <-t.C:
		err := c.rw.Close()
		<-c.wdone
		return err
	}
}

// Close closes the link at once; queued messages may be lost.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.queue = nil
	c.cond.Signal()
	c.mu.Unlock()
	err := c.rw.Close()
	<-c.wdone
	return err
}
