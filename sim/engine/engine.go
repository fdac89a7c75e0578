package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"p2pfault/netenv"
	"p2pfault/sim/kv"
	"p2pfault/sim/simlog"
	"p2pfault/sim/wire"
	"p2pfault/zmtp"
)

// Log components, as in vLLM's "[file.py:line]" slot.
const (
	compP2P    = "p2p"
	compEngine = "engine"
	compZMQ    = "zmq"
)

// inboxSize bounds the events waiting for the next step; a full inbox
// pushes back on readers like a full socket buffer would.
const inboxSize = 4096

// shutdownFlush bounds how long shutdown waits for disconnects to go out.
const shutdownFlush = time.Second

// Engine is one engine core. Its state is owned by the goroutine that calls
// Step; other goroutines (connection readers, dialers, the front-end link)
// only post events to its inbox.
type Engine struct {
	cfg         Config
	log         *simlog.Logger
	fingerprint string
	blockBytes  int64

	router *zmtp.Router // bound at the P2P address (conn.go)
	id     string       // own P2P identity, "host:port" literal
	inbox  chan event
	done   chan struct{} // closed at shutdown: posts stop blocking
	wg     sync.WaitGroup
	ctx    context.Context // cancels dials
	stop   context.CancelFunc

	// Owned by the stepping goroutine.
	now       time.Time // the current step's time
	lastStep  time.Time // when the last step's batch ended
	busyUntil time.Time // the batch executing ends then (sched.go)
	// loopWork is the CPU work this step's P2P handling did before the
	// batch goes out (a peer's registration): it holds the loop, and the
	// batch starts after it (sched.go).
	loopWork   time.Duration
	shut       bool
	gpu, cpu   *kv.LRU
	active     []*request
	byID       map[uint64]*request
	nextConnID uint64
	links      map[string]*link    // by peer identity (conn.go)
	closing    map[string]*link    // the latest link to each peer, until it is forgotten
	sessions   map[string]*session // consumer side, by peer identity
	// orphans are sessions reaped for silence whose loads run on to their
	// timeouts (DeadLoadsTimeout), in the order they died.
	orphans   []*session
	routes    map[string]*conn // producer side, by consumer identity
	stale     map[string]staleRoute
	held      []*heldLookup
	transfers []*transfer
	pins      map[pinKey]*pinSet
	computing map[uint64]int // blocks being prefilled: a lookup on them is held
	stats     statsLog
	refused   map[string]*refusals // peers refusing connects, by identity
	parked    map[string]*pdStore  // producer: PD stores by kv_request_id (pd.go)
	reaped    map[string]time.Time // producer: ids whose parked store was reaped, until forgotten

	onQueues   func(Queues) // see OnQueues
	lastQueues Queues
	queuesSent bool
}

// New returns an engine core for cfg; call Listen (when cfg.P2P) and then
// Run, or Start and Step for a test that drives the clock.
func New(cfg Config, log *simlog.Logger) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &Engine{
		cfg:         cfg,
		log:         log,
		fingerprint: cfg.Fingerprint(),
		blockBytes:  cfg.BlockBytes(),
		inbox:       make(chan event, inboxSize),
		done:        make(chan struct{}),
		ctx:         ctx,
		stop:        stop,
		gpu:         kv.NewLRU(cfg.GPUBlocks),
		cpu:         kv.NewLRU(cfg.CPUBlocks),
		byID:        make(map[uint64]*request),
		links:       make(map[string]*link),
		closing:     make(map[string]*link),
		sessions:    make(map[string]*session),
		routes:      make(map[string]*conn),
		stale:       make(map[string]staleRoute),
		pins:        make(map[pinKey]*pinSet),
		computing:   make(map[uint64]int),
		refused:     make(map[string]*refusals),
		parked:      make(map[string]*pdStore),
		reaped:      make(map[string]time.Time),
	}, nil
}

// Listen binds the P2P ROUTER. The identity is the configured host used
// verbatim plus the bound port, as vLLM's f"{host}:{port}".
func (e *Engine) Listen() error {
	if !e.cfg.P2P {
		return nil
	}
	addr := net.JoinHostPort(e.cfg.P2PHost, strconv.Itoa(e.cfg.P2PPort))
	ln, err := netenv.Or(e.cfg.Net).Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bind P2P port %s: %w", addr, err)
	}
	e.id = e.cfg.P2PHost + ":" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	e.router = zmtp.NewRouter(ln, e.zmtpOptions())
	return nil
}

// ID is the engine's P2P identity ("" without a P2P tier or before Listen).
func (e *Engine) ID() string { return e.id }

// Run starts the engine and steps it every tick until ctx is done, then
// shuts it down (disconnecting peers).
func (e *Engine) Run(ctx context.Context) error {
	e.Start()
	t := time.NewTicker(e.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			e.Shutdown()
			return nil
		case <-t.C:
			e.gate()
			// The wall clock, not the tick's stamp: after a freeze the stamp
			// is stale and the gap is what resume detection measures.
			e.Step(time.Now())
		}
	}
}

// Start starts reading the P2P ROUTER. What arrives is handled on the
// next Step.
func (e *Engine) Start() {
	if e.router == nil {
		return
	}
	e.log.Info(compP2P, "P2P tier listening as %s (fingerprint %s, hash seed %s, pending handshake: %s, lookup deadline: %s, dead-session loads: %s)",
		e.id, e.fingerprint, e.cfg.HashSeed, e.cfg.PendingHandshake, e.lookupDeadline(), e.cfg.DeadSessionLoads)
	if d := e.cfg.Defects; d.ReuseFreedBlocks || d.RecomputeKeepsPartial || d.LeakUnboundStores {
		var on []string
		if d.ReuseFreedBlocks {
			on = append(on, "reuse-freed-blocks (vllm#21570)")
		}
		if d.RecomputeKeepsPartial {
			on = append(on, "recompute-keeps-partial (vllm#49250)")
		}
		if d.LeakUnboundStores {
			on = append(on, "leak-unbound-stores (no _reap_unbound_stores)")
		}
		e.log.Warning(compEngine, "modelled defects on: %s", strings.Join(on, ", "))
	}
	e.wg.Add(1)
	go e.routerLoop()
}

// Submit hands a request to the engine under the caller's id, unique among
// the caller's requests in flight; done is called on the stepping goroutine
// when it finishes (never after Cancel). done must not block.
func (e *Engine) Submit(id uint64, req Request, done func(Result)) {
	if !e.post(evSubmit{id: id, req: req, done: done}) {
		done(Result{Err: ErrShutDown})
	}
}

// Cancel abandons a submitted request (its client went away).
func (e *Engine) Cancel(id uint64) { e.post(evCancel{id: id}) }

// ErrShutDown is the result of requests the engine dropped at shutdown.
var ErrShutDown = errors.New("engine core shut down")

// ErrDuplicateID is the result of a Submit whose id is already in flight.
var ErrDuplicateID = errors.New("request id already in flight")

func (e *Engine) post(ev event) bool {
	select {
	case <-e.done:
		return false
	default:
	}
	select {
	case e.inbox <- ev:
		return true
	case <-e.done:
		return false
	}
}

// Step runs one scheduler step at now. Resume detection comes before the
// inbox so that what a frozen process finds waiting is judged the same way
// whichever goroutine woke first.
//
// A step whose batch has prefill to compute executes for its length
// (schedule): a Step called before it ends does nothing, as vLLM's loop is
// in execute_model then, and the next one lands the batch first.
func (e *Engine) Step(now time.Time) {
	if e.shut || e.executing(now) {
		return
	}
	e.now = now
	e.loopWork = 0
	e.detectResume()
	e.landBatch()
	e.drainInbox()
	e.serveHeldLookups(false)
	e.finishTransfers()
	e.expirePins()
	e.expireStores()
	e.superviseSessions()
	e.advanceRequests()
	if e.schedule() > 0 && !e.executing(now) {
		// A batch that costs nothing (PrefillPerToken 0) ends at once.
		e.landBatch()
		e.advanceRequests()
	}
	e.logStats()
	e.reportQueues()
	// The gap resume detection measures runs from the batch's end: a long
	// step is not a freeze.
	e.lastStep = now
	if e.busyUntil.After(now) {
		e.lastStep = e.busyUntil
	}
}

func (e *Engine) detectResume() {
	if e.lastStep.IsZero() {
		return
	}
	gap := e.now.Sub(e.lastStep)
	if gap <= e.cfg.FreezeGap {
		return
	}
	e.log.Warning(compEngine, "engine resumed after %.1fs frozen", gap.Seconds())
	if !e.cfg.StaleRoute {
		return
	}
	for id, st := range e.stale {
		if !e.now.Before(st.until) {
			delete(e.stale, id) // swept long ago by the router's heartbeat
		}
	}
	// Every route that existed when the process froze may now be a dead
	// connection the router has not swept yet (reference §3).
	for id, c := range e.routes {
		e.stale[id] = staleRoute{c: c, until: e.now.Add(e.cfg.HeartbeatTimeout)}
	}
}

func (e *Engine) drainInbox() {
	for {
		select {
		case ev := <-e.inbox:
			e.handle(ev)
		default:
			return
		}
	}
}

func (e *Engine) handle(ev event) {
	switch ev := ev.(type) {
	case evSubmit:
		e.admit(ev)
	case evCancel:
		if r := e.byID[ev.id]; r != nil {
			r.cancelled = true
		}
	case evRouted:
		e.routed(ev.peer, ev.msg, ev.err)
	case evLink:
		e.linkEvent(ev.l, ev.ev)
	case evDo:
		ev.fn()
	}
}

// Shutdown disconnects every peer, drops in-flight requests and stops the
// engine's goroutines. Call it from the stepping goroutine (Run does).
func (e *Engine) Shutdown() {
	if e.shut {
		return
	}
	e.shut = true
	e.stop()
	// Peers learn of the shutdown when this engine's ROUTER closes: their
	// DEALERs' EVENT_DISCONNECTED (vLLM's liveness), at once. No disconnect
	// is sent: vLLM's ZmqTransport.close() sends none, and one would leave
	// on this engine's DEALER, to the peer's port, which a partition of
	// this engine's ports does not cut (the gone case: a core ended behind
	// a partition must fall silent, as a pod whose network is gone).
	for _, l := range e.links {
		e.closeLink(l, false)
	}
	for _, r := range e.active {
		if r.state != rsDone {
			e.finish(r, Result{Err: ErrShutDown})
		}
	}
	e.active = nil
	close(e.done)
	flushed := make(chan struct{})
	go func() { e.wg.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(shutdownFlush):
		e.gate()
	}
	// The ROUTER closes last: the disconnects have gone out.
	if e.router != nil {
		e.router.Close()
	}
	<-flushed
}

// gate blocks while the engine's process is frozen (Config.Gate).
func (e *Engine) gate() {
	if e.cfg.Gate != nil {
		e.cfg.Gate()
	}
}

type event interface{ isEvent() }

type evSubmit struct {
	id   uint64
	req  Request
	done func(Result)
}
type evCancel struct{ id uint64 }

// evRouted is a message read from the ROUTER, and its sender.
type evRouted struct {
	peer string
	msg  wire.Message
	err  error // the message did not parse: logged and dropped
}

// evLink is a monitor event of a link's DEALER.
type evLink struct {
	l  *link
	ev zmtp.Event
}

func (evSubmit) isEvent() {}
func (evCancel) isEvent() {}
func (evRouted) isEvent() {}
func (evLink) isEvent()   {}
func (evDo) isEvent()     {}

type evDo struct{ fn func() }
