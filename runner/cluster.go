package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fifo"
	"p2pfault/runfolder"
)

// errStopping is returned by an engine operation that the cluster's Stop
// interrupted or that came after it.
var errStopping = errors.New("the cluster is stopping")

// Cluster is the running engines of one run.
type Cluster struct {
	cfg     Config
	engines []*Engine
	spawn   *spawner
	events  *dispatcher

	// life is cancelled when Stop begins, so an operation in flight (a
	// restart waiting for readiness) gives way to it.
	life    context.Context
	endLife context.CancelFunc

	stopOnce  sync.Once
	stopDone  chan struct{}
	stopErr   error
	watchMu   sync.Mutex
	unwatch   func() bool    // ends the watch of Start's ctx
	sessionMu sync.Mutex     // serialises writes of sessions.json
	finalSave bool           // sessions.json was written by Stop: no write after it
	workers   sync.WaitGroup // log readers and reapers, waited for by Stop
	leftovers []SessionEntry
	firewall  firewallRecord // tables of network faults, in sessions.json
	owner     ProcID
	bootID    string
}

// Start starts every engine of cfg concurrently and waits until each
// answers GET /health with 200 (within cfg.ReadyTimeout). On failure it
// stops whatever it started and returns an error naming the engine, its
// exit status and its last log lines; a fixed port that is taken is a usage
// error naming the port and its holder.
//
// ctx bounds the cluster's life as well as its start: when ctx is cancelled
// (Ctrl-C) the cluster stops itself as Stop does. Call Stop in any case,
// typically deferred; it is safe to call twice and from a deferred recover.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.OutDir == "" {
		return nil, exitcode.Usagef("no output folder for the engines' logs and sessions.json (runner.Config.OutDir is empty)")
	}
	if err := os.MkdirAll(cfg.OutDir, runfolder.DirMode); err != nil {
		return nil, exitcode.AsUsage(fmt.Errorf("create output folder %s: %w", cfg.OutDir, err))
	}
	if cfg.Engine == EngineVLLM {
		path, err := exec.LookPath(cfg.VLLMBin)
		if err != nil {
			return nil, exitcode.AsUsage(fmt.Errorf("vllm binary %q: %w", cfg.VLLMBin, err))
		}
		cfg.VLLMBin = path
	}
	plans, err := planPorts(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PortPool == nil {
		// The cluster keeps the pool that picked its ports: a replaced
		// engine draws its new ones from it (replacementSpec).
		cfg.PortPool = NewPortPool()
	}
	for try := 1; ; try++ {
		c, err := startOn(ctx, cfg, plans)
		// Free ports are picked free, but bound only after the model
		// loads: another process (another p2pfault, a test beside it) can
		// bind one meanwhile, which the pool cannot see. Such a start is
		// tried again on new ports, as often as portTries says.
		if err == nil || !cfg.FreePorts || try == portTries || ctx.Err() != nil || !takenAtBind(err) {
			return c, err
		}
	}
}

// portTries is how many times Start starts a cluster on free ports when
// one of them was taken between its pick and its bind.
const portTries = 3

// takenAtBind reports whether an engine failed to start because a port it
// was to listen on was in use by then: the sim's `bind ...: address
// already in use`, Python's `[Errno 98] Address already in use`.
func takenAtBind(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

// startOn starts the cluster on free ports picked anew (every port not
// fixed, with FreePorts) and waits until every engine is ready.
func startOn(ctx context.Context, cfg Config, plans []portPlan) (*Cluster, error) {
	plans, err := resolvePorts(cfg, plans)
	if err != nil {
		return nil, err
	}
	specs, err := buildSpecs(cfg, plans)
	if err != nil {
		return nil, exitcode.AsUsage(err)
	}

	c, err := newCluster(cfg, specs)
	if err != nil {
		return nil, err
	}
	startCtx, cancel := c.opContext(ctx)
	defer cancel()
	errs := make([]error, len(c.engines))
	var wg sync.WaitGroup
	for i, e := range c.engines {
		wg.Go(func() {
			errs[i] = e.start(startCtx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopErr := c.Stop(context.Background())
		if ctx.Err() != nil {
			return nil, fmt.Errorf("start cluster: %w", errors.Join(ctx.Err(), stopErr))
		}
		return nil, exitcode.AsUsage(fmt.Errorf("start cluster: %w", errors.Join(err, stopErr)))
	}
	c.watchMu.Lock()
	c.unwatch = context.AfterFunc(ctx, func() { _ = c.Stop(context.Background()) })
	c.watchMu.Unlock()
	return c, nil
}

func newCluster(cfg Config, specs []Spec) (*Cluster, error) {
	owner, err := selfID()
	if err != nil {
		return nil, err
	}
	life, endLife := context.WithCancel(context.Background())
	c := &Cluster{
		cfg:      cfg,
		spawn:    newSpawner(),
		events:   newDispatcher(cfg.OnLog, cfg.OnChange),
		life:     life,
		endLife:  endLife,
		stopDone: make(chan struct{}),
		owner:    owner,
		bootID:   bootID(),
	}
	// Keep the live sessions of an earlier run in this folder in the new
	// file, so `p2pfault cleanup` still finds them after we overwrite it.
	if left, err := Leftovers(cfg.OutDir); err == nil {
		for _, l := range left {
			c.leftovers = append(c.leftovers, l.SessionEntry)
		}
	}
	if f, err := readSessionsFile(cfg.OutDir); err == nil {
		c.leftoverFirewall(f)
	}
	for _, s := range specs {
		c.engines = append(c.engines, &Engine{c: c, spec: s, tail: newRing(cfg.LogTail), state: event.StateStarting})
	}
	// The record is written before the first engine starts: a folder
	// where it cannot be (sessions.json a symbolic link) stops the run
	// here, not after engines that cleanup could not find.
	if err := c.writeSessions(); err != nil {
		return nil, exitcode.AsUsage(err)
	}
	return c, nil
}

// Engines returns every engine: the sources in order, then the decoders.
func (c *Cluster) Engines() []*Engine { return append([]*Engine(nil), c.engines...) }

// Sources returns the source engines in index order.
func (c *Cluster) Sources() []*Engine {
	return append([]*Engine(nil), c.engines[:c.sources()]...)
}

// Decoders returns the decoder engines in index order.
func (c *Cluster) Decoders() []*Engine {
	return append([]*Engine(nil), c.engines[c.sources():]...)
}

// Decoder returns the first decoder engine (the only one, unless the
// config asked for several).
func (c *Cluster) Decoder() *Engine { return c.engines[c.sources()] }

// sources is how many of the engines are sources: they come first.
func (c *Cluster) sources() int {
	n := 0
	for n < len(c.engines) && c.engines[n].spec.Role == event.RoleSource {
		n++
	}
	return n
}

// Source returns source i, or an error naming the index.
func (c *Cluster) Source(i int) (*Engine, error) {
	if i < 0 || i >= c.sources() {
		return nil, fmt.Errorf("source %d: the cluster has sources 0-%d", i, c.sources()-1)
	}
	return c.engines[i], nil
}

// Engine returns the engine with the given name ("source-0", "decoder").
func (c *Cluster) Engine(name string) (*Engine, error) {
	for _, e := range c.engines {
		if e.spec.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("no engine named %q", name)
}

// OutDir is the folder of the engines' logs and sessions.json.
func (c *Cluster) OutDir() string { return c.cfg.OutDir }

// Stop ends every engine: SIGCONT (a stalled engine cannot handle
// SIGTERM), SIGTERM, SIGKILL after StopGrace or when ctx ends, then waits
// until each session has no live process and each engine is reaped. It is
// safe to call more than once and concurrently; every call returns the
// first call's result once the cluster is down.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.stopErr = c.stop(ctx)
		close(c.stopDone)
	})
	<-c.stopDone
	return c.stopErr
}

// workersWait bounds how long Stop waits for reapers and log readers once
// every engine is stopped.
const workersWait = 2 * time.Second

func (c *Cluster) stop(ctx context.Context) error {
	c.watchMu.Lock()
	if c.unwatch != nil {
		c.unwatch()
	}
	c.watchMu.Unlock()
	c.endLife()
	errs := make([]error, len(c.engines))
	var wg sync.WaitGroup
	for i, e := range c.engines {
		wg.Go(func() { errs[i] = e.stopForGood(ctx) })
	}
	wg.Wait()
	// The reapers and log readers end once the sessions are gone; wait for
	// them so nothing writes to the output folder after Stop returns. A log
	// reader whose pipe a stray process still holds is not waited for
	// longer than stopForGood waits for it.
	done := make(chan struct{})
	go func() { c.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(workersWait):
	}
	errs = append(errs, c.writeSessions())
	c.sessionMu.Lock()
	c.finalSave = true
	c.sessionMu.Unlock()
	c.spawn.close()
	c.events.close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop cluster: %w", err)
	}
	return nil
}

// opContext is ctx, also cancelled when the cluster starts stopping.
func (c *Cluster) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(c.life, func() { cancel(errStopping) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

func (c *Cluster) logPath(name string) string {
	return runfolder.Log(c.cfg.OutDir, name)
}

// spawner starts every engine from one goroutine locked to its OS thread.
// Go's Pdeathsig is tied to the thread that forked the child, and the
// runtime may end an idle thread; this thread lives until the cluster is
// stopped, and then exits still locked, so the kernel SIGKILLs anything it
// forked that is somehow still alive.
type spawner struct {
	reqs chan spawnReq
	quit chan struct{}
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	runtime.LockOSThread()
	// No UnlockOSThread: returning locked ends the thread (see spawner).
	for {
		select {
		case r := <-s.reqs:
			r.done <- r.cmd.Start()
		case <-s.quit:
			return
		}
	}
}

func (s *spawner) start(cmd *exec.Cmd) error {
	r := spawnReq{cmd: cmd, done: make(chan error, 1)}
	select {
	case s.reqs <- r:
		return <-r.done
	case <-s.quit:
		return errStopping
	}
}

func (s *spawner) close() { s.once.Do(func() { close(s.quit) }) }

// dispatcher calls OnLog and OnChange from one goroutine, in order, so
// callers never hold an engine's lock while user code runs.
type dispatcher struct {
	onLog    func(string, string)
	onChange func(event.EngineInfo)
	q        *fifo.Queue[func()]
}

// maxQueued bounds the log lines waiting for a slow OnLog; state changes
// are never dropped.
const maxQueued = 10000

func newDispatcher(onLog func(string, string), onChange func(event.EngineInfo)) *dispatcher {
	return &dispatcher{onLog: onLog, onChange: onChange, q: fifo.New(func(fn func()) { fn() }, nil)}
}

func (d *dispatcher) log(engine, line string) {
	if d.onLog != nil {
		d.q.Put(func() { d.onLog(engine, line) }, maxQueued)
	}
}

func (d *dispatcher) change(ch event.EngineInfo) {
	if d.onChange != nil {
		d.q.Put(func() { d.onChange(ch) }, 0)
	}
}

// close delivers what is queued and ends the dispatcher.
func (d *dispatcher) close() {
	d.q.Close()
	select {
	case <-d.q.Done():
	case <-time.After(10 * time.Second):
		// A callback that blocks must not keep Stop from returning.
	}
}
