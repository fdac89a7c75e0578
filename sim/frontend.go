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
	metrics metrics

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan link.Msg

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
		pending:  make(map[uint64]chan link.Msg),
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
			ch := f.pending[m.ID]
			delete(f.pending, m.ID)
			f.mu.Unlock()
			if ch != nil {
				ch <- m
			}
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
	ch := make(chan link.Msg, 1)
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	f.pending[id] = ch
	f.mu.Unlock()
	forget := func() {
		f.mu.Lock()
		delete(f.pending, id)
		f.mu.Unlock()
	}
	err := f.link.Send(link.Msg{Type: link.TypeSubmit, ID: id, Tokens: req.Tokens, CacheSalt: req.CacheSalt,
		MaxTokens: req.MaxTokens, Source: req.Source})
	if err != nil {
		forget()
		return link.Msg{}, fmt.Errorf("%w: %v", errCoreGone, err)
	}
	select {
	case m := <-ch:
		return m, nil
	case <-ctx.Done():
		forget()
		_ = f.link.Send(link.Msg{Type: link.TypeCancel, ID: id})
		return link.Msg{}, ctx.Err()
	case <-f.gone:
		forget()
		return link.Msg{}, errCoreGone
	}
}

// resultMsg turns an engine result into the link message for request id.
func resultMsg(id uint64, res engine.Result) link.Msg {
	m := link.Msg{Type: link.TypeResult, ID: id, CachedTokens: res.CachedTokens, Stats: res.Stats}
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
