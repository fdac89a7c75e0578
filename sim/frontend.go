package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"p2pfault/sim/engine"
	"p2pfault/sim/link"
	"p2pfault/sim/simlog"
)

// Log components of the front end and the core, as vLLM's "[file.py:line]".
const (
	compAPI    = "api_server"
	compEngine = "engine"
)

// errCoreGone is returned for requests in flight when the core's link ends.
var errCoreGone = errors.New("engine core is not running")

// frontEnd is the HTTP side of an engine: it tokenizes, validates and
// forwards requests to the engine core over the link, and keeps /metrics.
type frontEnd struct {
	cfg     serveConfig
	log     *simlog.Logger
	link    *link.Conn
	metrics *metrics
	vocab   *vocabMemory

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call

	startup      chan link.Msg // the core's ready or fatal, once
	gone         chan struct{} // closed when the link ends
	shutdown     chan struct{} // closed when the core says it stops on a signal
	shutdownOnce sync.Once
}

func newFrontEnd(cfg serveConfig, l *link.Conn, log *simlog.Logger) *frontEnd {
	f := &frontEnd{
		cfg:      cfg,
		log:      log,
		link:     l,
		pending:  make(map[uint64]*call),
		vocab:    newVocabMemory(),
		metrics:  newMetrics(),
		startup:  make(chan link.Msg, 1),
		gone:     make(chan struct{}),
		shutdown: make(chan struct{}),
	}
	go f.readLoop()
	return f
}

func (f *frontEnd) readLoop() {
	defer close(f.gone)
	for {
		m, err := f.link.Recv()
		if err != nil {
			return
		}
		switch m.Type {
		case link.TypeReady, link.TypeFatal:
			select {
			case f.startup <- m:
			default:
			}
		case link.TypeResult:
			f.mu.Lock()
			c := f.pending[m.ID]
			delete(f.pending, m.ID)
			f.mu.Unlock()
			if c != nil {
				c.finish(m)
			}
		case link.TypeToken, link.TypeDecoding:
			f.mu.Lock()
			c := f.pending[m.ID]
			f.mu.Unlock()
			if c != nil {
				c.token(m)
			}
		case link.TypeAborted:
			f.metrics.abort(m.Stats, m.N)
		case link.TypeQueues:
			if m.Queues != nil {
				f.metrics.setQueues(*m.Queues)
			}
		case link.TypeShutdown:
			f.log.Info(compAPI, "engine core is shutting down: %s", m.Message)
			f.shutdownOnce.Do(func() { close(f.shutdown) })
		}
	}
}

// stopping reports whether the core announced a clean shutdown.
func (f *frontEnd) stopping() bool {
	select {
	case <-f.shutdown:
		return true
	default:
		return false
	}
}

// complete runs req on the core and waits for its result. A client that
// goes away cancels the request in the core, as vLLM aborts it.
func (f *frontEnd) complete(ctx context.Context, req completionRequest) (link.Msg, error) {
	c, err := f.submit(req, false)
	if err != nil {
		return link.Msg{}, err
	}
	for {
		select {
		case <-c.wake:
			if res, _, _, done := c.state(); done {
				return res, nil
			}
		case <-ctx.Done():
			f.cancel(c)
			return link.Msg{}, ctx.Err()
		case <-f.gone:
			f.forget(c)
			return link.Msg{}, errCoreGone
		}
	}
}

// submit sends req to the core; with stream, the core reports each token.
func (f *frontEnd) submit(req completionRequest, stream bool) (*call, error) {
	c := &call{wake: make(chan struct{}, 1)}
	f.mu.Lock()
	f.nextID++
	c.id = f.nextID
	f.pending[c.id] = c
	f.mu.Unlock()
	err := f.link.Send(link.Msg{Type: link.TypeSubmit, ID: c.id, Tokens: req.Tokens, CacheSalt: req.CacheSalt,
		MaxTokens: req.MaxTokens, Source: req.Source, Decoder: req.RemoteDecoder, Stream: stream})
	if err != nil {
		f.forget(c)
		return nil, fmt.Errorf("%w: %v", errCoreGone, err)
	}
	return c, nil
}

func (f *frontEnd) forget(c *call) {
	f.mu.Lock()
	delete(f.pending, c.id)
	f.mu.Unlock()
}

// cancel abandons c: the core drops the request and reports the abort.
func (f *frontEnd) cancel(c *call) {
	f.forget(c)
	_ = f.link.Send(link.Msg{Type: link.TypeCancel, ID: c.id})
}

// call is one request in flight on the core. The link's reader updates it
// and never blocks: wake holds at most one pending notice.
type call struct {
	id   uint64
	wake chan struct{}

	mu     sync.Mutex
	tokens int    // sampled so far (streamed requests)
	kv     uint64 // streamed: the digest of the KV decoded from, known from its first token on
	res    link.Msg
	done   bool
}

func (c *call) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// token records a streamed request's progress: its decode's start (the KV
// digest) or its token N.
func (c *call) token(m link.Msg) {
	c.mu.Lock()
	if m.Type == link.TypeDecoding {
		c.kv = m.KV
	} else if m.N > c.tokens {
		c.tokens = m.N
	}
	c.mu.Unlock()
	c.notify()
}

func (c *call) finish(m link.Msg) {
	c.mu.Lock()
	c.res, c.done = m, true
	c.mu.Unlock()
	c.notify()
}

func (c *call) state() (res link.Msg, tokens int, kv uint64, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res, c.tokens, c.kv, c.done
}

// resultMsg turns an engine result into the link message for request id.
func resultMsg(id uint64, res engine.Result) link.Msg {
	m := link.Msg{Type: link.TypeResult, ID: id, CachedTokens: res.CachedTokens, KV: res.KV, Stats: res.Stats}
	if res.Err != nil {
		m.Message = res.Err.Error()
		m.ErrKind = link.ErrKindShutdown
		var le *engine.LoadError
		if errors.As(res.Err, &le) {
			m.ErrKind = link.ErrKindLoad
		}
	}
	return m
}
