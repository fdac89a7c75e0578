package attach

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"p2pfault/attach/guard"
	"p2pfault/enginehealth"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// Options are how an attached cluster is faulted; the zero value works
// for checks and command faults without guards.
type Options struct {
	// LogDir receives the logs of engines p2pfault restarts (a local kill
	// or restore) and of guards: the run's folder.
	LogDir string
	// Book records stalls before they are sent (OUT/stalls.json) so that
	// `p2pfault cleanup` can resume them; nil records nothing.
	Book *guard.Book
	// Guard runs a guard process (guard.Config.Argv), started with every
	// stall; nil starts none (then only Close and the record resume).
	Guard    []string
	GuardEnv []string

	CommandTimeout time.Duration // per fault command; default 60 s
	ReadyTimeout   time.Duration // Ready's wait for /health 200; default runner.DefaultVLLMReadyTimeout (1200 s, vLLM's model load)
	HealthTimeout  time.Duration // one /health request; default runner.HealthTimeout (2 s)
	StopGrace      time.Duration // remove: SIGTERM, then SIGKILL after this; default runner.DefaultStopGrace (10 s)
	// Client sends the /health requests; default a client without proxy.
	Client *http.Client
}

func (o Options) withDefaults() Options {
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = time.Minute
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = runner.DefaultVLLMReadyTimeout
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = runner.HealthTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = runner.DefaultStopGrace
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	return o
}

// Cluster is an attached cluster: the engines of an attach file, checked.
// It is what a run opens (experiment.Opener) and the cluster it probes and
// faults (experiment.Cluster): cluster.go.
type Cluster struct {
	file    *File
	opts    Options
	sources []*Target
	decoder *Target
	// decoders are every decoder by index, decoder first: the file's
	// `decoders:` entries (each faulted as a source is), or its one
	// `decoder:`.
	decoders []*Target
}

// Open checks f up front (Check) and returns the cluster. It starts and
// stops nothing.
func Open(ctx context.Context, f *File, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if f.Kubernetes != nil {
		// run and slice take the block as --kube (cli); here, a file
		// with no engine of its own to attach to.
		return nil, exitcode.Usagef("%s: its kubernetes: block names pods, which run and slice --attach reach as --kube does; it lists no engine to attach to here", f.Path)
	}
	if err := Check(ctx, f, opts); err != nil {
		return nil, err
	}
	return newCluster(f, opts), nil
}

// newCluster is the cluster of a checked file: a target per engine.
func newCluster(f *File, opts Options) *Cluster {
	c := &Cluster{file: f, opts: opts}
	for i := range f.Sources {
		c.sources = append(c.sources, faulted(newTarget(f.Sources[i], opts, event.RoleSource, i)))
	}
	for d := range f.Decoders {
		t := faulted(newTarget(f.Decoders[d], opts, event.RoleDecoder, d))
		// The run names it as it names a launched one (decoder-1); its
		// entry's name fills its commands' {name}.
		t.name = event.DecoderName(d, len(f.Decoders))
		c.decoders = append(c.decoders, t)
	}
	if len(c.decoders) == 0 {
		// The one `decoder:` is probed and watched, never faulted: it has
		// no faulter.
		t := newTarget(Source{Name: runner.DecoderName, Endpoint: f.Decoder, P2PHost: f.DecoderP2P.Host, P2PPort: f.DecoderP2P.Port}, opts, event.RoleDecoder, 0)
		t.local = isLoopback(f.Decoder.Host)
		c.decoders = []*Target{t}
	}
	c.decoder = c.decoders[0]
	return c
}

// faulted gives t the faulter its entry says: local signals, or its
// commands.
func faulted(t *Target) *Target {
	if t.src.Faults.Local {
		t.faulter = &localFaulter{t: t}
	} else {
		t.faulter = &commandFaulter{t: t}
	}
	return t
}

// File is the attach file the cluster was opened from.
func (c *Cluster) File() *File { return c.file }

// Source returns the source named name.
func (c *Cluster) Source(name string) (*Target, bool) {
	for _, t := range c.sources {
		if t.src.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Close leaves the cluster as found: it resumes every stall p2pfault holds
// and, when the file says restore_at_end, restores removed sources and
// waits for them. Engines are never stopped. Call it on every way out.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	for _, t := range c.engines() {
		if t.faulter == nil {
			continue // the one unfaulted decoder
		}
		if t.Stalled() {
			// A stall's own resume (its timer, the run's end) may have
			// won the race: only a stall still held is an error.
			if _, err := t.Do(ctx, fault.ActionResume); err != nil && t.Stalled() {
				errs = append(errs, err)
			}
		}
		if c.file.RestoreAtEnd && t.Removed() {
			if _, err := t.Do(ctx, fault.ActionRestore); err != nil {
				errs = append(errs, err)
			} else if _, err := t.Do(ctx, fault.ActionReady); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Result is what one action did, for the event log.
type Result struct {
	Source string
	Action string        // a fault kind's name, or fault.ActionReady
	At     time.Time     // when it took effect: the signal sent, the command ended, the engine answered
	Took   time.Duration // from the start of the action to At

	// Local faults.
	Sid    int   // the session acted on
	Pids   []int // the processes signalled
	NewPid int   // a restarted engine's leader; its session is NewPid
	Log    string

	// Command faults.
	Argv     []string // filled in
	ExitCode int
	Output   string
	// Moved is where a replace command said the new engine answers.
	Moved *Address
}

// faulter is one way of faulting a source: an executor per kind
// (actions.go). The caller of an executor holds the target's lock. g is
// what of the source the action acts on (the whole engine, or one
// data-parallel rank: rank.go); a resume undoes the stall in force and a
// restore brings the whole engine back, whatever their grain.
type faulter interface {
	doStall(ctx context.Context, g fault.Grain) (Result, error)
	doResume(ctx context.Context, g fault.Grain) (Result, error)
	doKill(ctx context.Context, g fault.Grain) (Result, error)
	doRemove(ctx context.Context, g fault.Grain) (Result, error)
	doRestore(ctx context.Context, g fault.Grain) (Result, error)
	doReplace(ctx context.Context, g fault.Grain) (Result, error)
	// readyWait snapshots what the Ready wait needs, under the target's
	// lock; the wait itself (minutes for a model load) runs without it.
	readyWait() func(context.Context) (Result, error)
	stalled() bool
	// stallGrain is the grain of the stall in force (one rank's, or the
	// whole source's), when stalled.
	stallGrain() fault.Grain
	removed() bool
}

// Target is one engine of an attach file: a source acted on by fault
// kinds, or the decoder (probed and watched, never faulted). Its methods
// are safe for concurrent use; actions other than ready run one at a
// time.
type Target struct {
	src Source
	// name is the engine's name in the run when it is not its entry's
	// (a `decoders:` entry's: decoder-1).
	name    string
	opts    Options
	role    event.Role
	index   int
	local   bool       // on this host: /proc shows its process
	mu      sync.Mutex // one action at a time
	faulter faulter    // nil for the decoder

	// What State reports, cached and refreshed (cluster.go), and src's
	// address, which a replace moves (src.Endpoint, src.P2P*: read them
	// through Source).
	stateMu  sync.Mutex
	health   string // "ok" or the last error, in a few words
	proc     *session.Proc
	members  []int
	restarts int
	busy     bool // a kill or restore under way
}

func newTarget(src Source, opts Options, role event.Role, index int) *Target {
	return &Target{src: src, opts: opts, role: role, index: index, local: src.Faults.Local, health: "not asked yet"}
}

// Name is the engine's name in the file.
func (t *Target) Name() string {
	if t.name != "" {
		return t.name
	}
	return t.src.Name
}

// Source is the source's entry of the file, at the address it answers at
// now (a replace command's new one, once it moved there).
func (t *Target) Source() Source {
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	return t.src
}

// moveTo makes a the source's address: its URL, its P2P address and the
// placeholders of its commands from now on.
func (t *Target) moveTo(a Address) {
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	m := t.src.Moved(a)
	t.src.Endpoint, t.src.P2P, t.src.P2PHost, t.src.P2PPort = m.Endpoint, m.P2P, m.P2PHost, m.P2PPort
}

// Local reports whether the source is faulted locally.
func (t *Target) Local() bool { return t.src.Faults.Local }

// cannot says why the source cannot take action a on grain g at all, nil
// when it can (Supports for the whole source): a local source every kind
// attach knows but replace, on the whole source or one rank; a commands
// source the ones the file gives a command for, on the grain the command
// names (Source.rankRefusal); ready always (it waits for /health).
func (t *Target) cannot(a string, g fault.Grain) error {
	_, known := executors[a]
	switch {
	case a == fault.ActionReady:
		return nil
	case t.src.Faults.Local && a == fault.ActionReplace:
		return errors.New(localReplace)
	case t.src.Faults.Local && !known:
		return fmt.Errorf("a local source cannot take %s (it takes %s)", a, localKinds())
	case t.src.Faults.Local:
		return nil
	}
	if _, ok := t.src.Faults.Commands[a]; !ok {
		return fmt.Errorf("the attach file gives no %s command for this source", a)
	}
	return t.src.rankRefusal(a, g)
}

// Supports reports whether the whole source can take action a (cannot).
func (t *Target) Supports(a string) bool { return t.cannot(a, fault.Grain{}) == nil }

// Stalled reports whether p2pfault holds a stall of the source.
func (t *Target) Stalled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faulter != nil && t.faulter.stalled()
}

// stalledOn is the grain of the stall p2pfault holds of the source, if it
// holds one.
func (t *Target) stalledOn() (fault.Grain, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.faulter == nil || !t.faulter.stalled() {
		return fault.Grain{}, false
	}
	return t.faulter.stallGrain(), true
}

// Removed reports whether p2pfault removed the source and has not restored it.
func (t *Target) Removed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faulter != nil && t.faulter.removed()
}

// condition is what the source is in as p2pfault faulted it, for the
// kinds' one refusal rule; the caller holds t.mu.
func (t *Target) condition() event.Condition {
	switch {
	case t.faulter.stalled():
		return event.CondStalled
	case t.faulter.removed():
		return event.CondRemoved
	}
	return event.CondUp
}

// Do takes action a (a fault kind's name, or fault.ActionReady) on the
// source. Kill and restore return once the engine is killed or started
// again; ready waits until it answers /health. A kind the source is not in
// the condition for is refused with fault's words (Kind.Refusal), as the
// experiment refuses it. An error names the source and the action and
// wraps the cause.
func (t *Target) Do(ctx context.Context, a string) (Result, error) {
	r, err := t.do(ctx, a)
	if err != nil {
		return r, fmt.Errorf("%s: %s: %w", t.src.Name, a, err)
	}
	return r, nil
}

// do is Do with an error that names neither the source nor the action.
// It is the edge where a word becomes a kind: it is looked up once, and
// refused by the kind's rule over what p2pfault did to the source (a run
// refuses its actions in the experiment, before they reach the target's
// methods).
func (t *Target) do(ctx context.Context, a string) (Result, error) {
	if a == fault.ActionReady {
		return t.act(ctx, a, nil)
	}
	k, ok := fault.Lookup(a)
	ex, known := executors[a]
	if !ok || !known {
		return Result{}, fmt.Errorf("unknown action %q (want %s)", a, actionList())
	}
	take := t.taking(a, fault.Grain{}, ex)
	return t.act(ctx, a, func(f faulter, ctx context.Context) (Result, error) {
		if why := k.Refusal(t.src.Name, t.condition()); why != "" {
			return Result{}, errors.New(why)
		}
		return take(f, ctx)
	})
}

// step is one action to take on the source, its grain bound: an executor
// the target's lock is held for.
type step func(faulter, context.Context) (Result, error)

// taking is executor ex of action a on grain g once the source can take a
// there at all (cannot): a file without the command, a local replace, a
// command without {rank} on one rank, is refused.
func (t *Target) taking(a string, g fault.Grain, ex executor) step {
	return func(f faulter, ctx context.Context) (Result, error) {
		if err := t.cannot(a, g); err != nil {
			return Result{}, err
		}
		return ex(f, ctx, g)
	}
}

// act runs step ex of action a (ready: the wait for the source to
// answer; ex is nil) under the target's lock, and fills in the result's
// source, action and timing. Its error names neither the source nor the
// action: the fault kinds acting through the Target methods name both.
func (t *Target) act(ctx context.Context, a string, ex step) (Result, error) {
	if t.faulter == nil {
		return Result{}, errors.New("the decoder of an attached cluster is not faulted")
	}
	start := time.Now()
	var r Result
	var err error
	if a == fault.ActionReady {
		t.mu.Lock()
		wait := t.faulter.readyWait()
		t.mu.Unlock()
		r, err = wait(ctx)
	} else {
		t.mu.Lock()
		r, err = ex(t.faulter, ctx)
		t.mu.Unlock()
	}
	r.Source, r.Action = t.src.Name, a
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.Took = r.At.Sub(start)
	return r, err
}

// Process is the local process listening on the source's P2P port (its
// pid and session, for the process table).
func (t *Target) Process() (Listener, error) {
	s := t.Source()
	return FindListener(s.P2PHost, s.P2PPort)
}

// Health asks the engine's /health once.
func (t *Target) Health(ctx context.Context) error {
	return health(ctx, t.opts, t.Source().URL)
}

func health(ctx context.Context, o Options, base string) error {
	ctx, cancel := context.WithTimeout(ctx, o.HealthTimeout)
	defer cancel()
	return enginehealth.Ask(ctx, o.Client, base)
}

// waitHealthy polls base/health until it answers 200, exited reports the
// engine gone for good, or the ready timeout or ctx ends.
func waitHealthy(ctx context.Context, o Options, base string, exited func() error) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	var last error
	for {
		if last = health(ctx, o, base); last == nil {
			return time.Now(), nil
		}
		if exited != nil {
			if err := exited(); err != nil {
				return time.Time{}, err
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s/health not ready: %w (%w)", base, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (t *Target) guardLog() string {
	if t.opts.LogDir == "" {
		return ""
	}
	return filepath.Join(t.opts.LogDir, "guard-"+t.src.Name+".log")
}

func (t *Target) engineLog() (string, error) {
	if t.opts.LogDir == "" {
		return "", exitcode.Usagef("no folder for the log of a restarted engine")
	}
	if err := os.MkdirAll(t.opts.LogDir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(t.opts.LogDir, "attached-"+t.src.Name+".log"), nil
}
