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
// forwards requests to an engine core over its link, and keeps /metrics.
// With data parallelism it has one core per rank and picks the rank of
// each request as vLLM's DP front end does (balance.go).
type frontEnd struct {
	cfg   serveConfig
	log   *simlog.Logger
	vocab *vocabMemory
	cores []*coreLink // by rank
	lb    balancer

	gone         chan struct{} // closed when the first core's link ends
	goneRank     int           // that core's rank, set before gone is closed
	goneOnce     sync.Once
	shutdown     chan struct{} // closed when a core says it stops on a signal
	shutdownOnce sync.Once
}

// coreLink is the front end's side of one engine core's link.
type coreLink struct {
	rank    int
	link    *link.Conn
	metrics metrics

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	lbLoad  engine.Queues // the balancer's view: the core's last report plus the picks since

	startup chan link.Msg // the core's ready or fatal, once
	gone    chan struct{} // closed when the link ends
}

func newFrontEnd(cfg serveConfig, links []*link.Conn, log *simlog.Logger) *frontEnd {
	f := &frontEnd{
		cfg:      cfg,
		log:      log,
		vocab:    newVocabMemory(),
		gone:     make(chan struct{}),
		shutdown: make(chan struct{}),
	}
	for r, l := range links {
		c := &coreLink{rank: r, link: l, pending: make(map[uint64]*call), startup: make(chan link.Msg, 1), gone: make(chan struct{})}
		f.cores = append(f.cores, c)
		go f.readLoop(c)
	}
	return f
}

func (f *frontEnd) readLoop(c *coreLink) {
	defer func() {
		close(c.gone)
		f.goneOnce.Do(func() { f.goneRank = c.rank; close(f.gone) })
	}()
	for {
		m, err := c.link.Recv()
		if err != nil {
			return
		}
		switch m.Type {
		case link.TypeReady, link.TypeFatal:
			select {
			case c.startup <- m:
			default:
			}
		case link.TypeResult:
			c.mu.Lock()
			call := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if call != nil {
				call.finish(m)
			}
		case link.TypeToken, link.TypeDecoding:
			c.mu.Lock()
			call := c.pending[m.ID]
			c.mu.Unlock()
			if call != nil {
				call.token(m)
			}
		case link.TypeAborted:
			c.metrics.abort(m.Stats, m.N)
		case link.TypeQueues:
			if m.Queues != nil {
				c.metrics.setQueues(*m.Queues)
				c.mu.Lock()
				c.lbLoad = *m.Queues
				c.mu.Unlock()
			}
		case link.TypeShutdown:
			f.log.Info(compAPI, "engine core %s is shutting down: %s", coreName(c.rank), m.Message)
			f.shutdownOnce.Do(func() { close(f.shutdown) })
		}
	}
}

// coreName is how vLLM names a data-parallel engine core in its logs and
// process title (EngineCore_DP<rank>).
func coreName(rank int) string { return fmt.Sprintf("EngineCore_DP%d", rank) }

// stopping reports whether a core announced a clean shutdown.
func (f *frontEnd) stopping() bool {
	select {
	case <-f.shutdown:
		return true
	default:
		return false
	}
}

// complete runs req on a core and waits for its result. A client that
// goes away cancels the request in the core, as vLLM aborts it.
func (f *frontEnd) complete(ctx context.Context, req completionRequest) (link.Msg, *coreLink, error) {
	c, err := f.submit(req, false)
	if err != nil {
		return link.Msg{}, nil, err
	}
	for {
		select {
		case <-c.wake:
			if res, _, _, done := c.state(); done {
				return res, c.core, nil
			}
		case <-ctx.Done():
			f.cancel(c)
			return link.Msg{}, c.core, ctx.Err()
		case <-c.core.gone:
			f.forget(c)
			return link.Msg{}, c.core, errCoreGone
		}
	}
}

// submit sends req to the core of its rank (req.DPRank, or the balancer's
// pick); with stream, the core reports each token.
func (f *frontEnd) submit(req completionRequest, stream bool) (*call, error) {
	var core *coreLink
	if req.DPRank != nil {
		core = f.cores[*req.DPRank]
	} else {
		core = f.lb.pick(f.cores)
	}
	c := &call{core: core, wake: make(chan struct{}, 1)}
	core.mu.Lock()
	core.nextID++
	c.id = core.nextID
	core.pending[c.id] = c
	core.mu.Unlock()
	err := core.link.Send(link.Msg{Type: link.TypeSubmit, ID: c.id, Tokens: req.Tokens, CacheSalt: req.CacheSalt,
		MaxTokens: req.MaxTokens, Source: req.Source, Decoder: req.RemoteDecoder, Stream: stream})
	if err != nil {
		f.forget(c)
		return nil, fmt.Errorf("%w: %v", errCoreGone, err)
	}
	return c, nil
}

func (f *frontEnd) forget(c *call) {
	c.core.mu.Lock()
	delete(c.core.pending, c.id)
	c.core.mu.Unlock()
}

// cancel abandons c: the core drops the request and reports the abort.
func (f *frontEnd) cancel(c *call) {
	f.forget(c)
	_ = c.core.link.Send(link.Msg{Type: link.TypeCancel, ID: c.id})
}

// call is one request in flight on the core. The link's reader updates it
// and never blocks: wake holds at most one pending notice.
type call struct {
	id   uint64
	core *coreLink // the rank it runs on
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
