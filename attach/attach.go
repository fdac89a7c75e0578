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
	"p2pfault/exitcode"
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
	ReadyTimeout   time.Duration // Ready's wait for /health 200; default 1200 s (vLLM's model load)
	HealthTimeout  time.Duration // one /health request; default 2 s
	StopGrace      time.Duration // remove: SIGTERM, then SIGKILL after this; default 10 s
	// Client sends the /health requests; default a client without proxy.
	Client *http.Client
}

func (o Options) withDefaults() Options {
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = time.Minute
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 1200 * time.Second
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 2 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	return o
}

// Cluster is an attached cluster: the engines of an attach file, checked.
type Cluster struct {
	file    *File
	opts    Options
	sources []*Target
}

// Open checks f up front (Check) and returns the cluster. It starts and
// stops nothing.
func Open(ctx context.Context, f *File, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := Check(ctx, f, opts); err != nil {
		return nil, err
	}
	c := &Cluster{file: f, opts: opts}
	for i := range f.Sources {
		t := &Target{src: f.Sources[i], opts: opts}
		if t.src.Faults.Local {
			t.faulter = &localFaulter{t: t}
		} else {
			t.faulter = &commandFaulter{t: t}
		}
		c.sources = append(c.sources, t)
	}
	return c, nil
}

// File is the attach file the cluster was opened from.
func (c *Cluster) File() *File { return c.file }

// Sources are the sources, in the file's order.
func (c *Cluster) Sources() []*Target { return c.sources }

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
	for _, t := range c.sources {
		if t.Stalled() {
			// A stall's own resume (its timer, the run's end) may have
			// won the race: only a stall still held is an error.
			if _, err := t.Do(ctx, Resume); err != nil && t.Stalled() {
				errs = append(errs, err)
			}
		}
		if c.file.RestoreAtEnd && t.Removed() {
			if _, err := t.Do(ctx, Restore); err != nil {
				errs = append(errs, err)
			} else if _, err := t.Do(ctx, Ready); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Result is what one action did, for the event log.
type Result struct {
	Source string
	Action Action
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
}

// faulter is one way of faulting a source.
type faulter interface {
	do(ctx context.Context, a Action) (Result, error)
	// readyWait snapshots what the Ready wait needs, under the target's
	// lock; the wait itself (minutes for a model load) runs without it.
	readyWait() func(context.Context) (Result, error)
	stalled() bool
	removed() bool
}

// Target is one attached source, acted on by fault kinds. Its methods are
// safe for concurrent use; actions other than Ready run one at a time.
type Target struct {
	src     Source
	opts    Options
	mu      sync.Mutex // one action at a time
	faulter faulter
}

// Name is the source's name.
func (t *Target) Name() string { return t.src.Name }

// Source is the source's entry of the file.
func (t *Target) Source() Source { return t.src }

// Local reports whether the source is faulted locally.
func (t *Target) Local() bool { return t.src.Faults.Local }

// Supports reports whether the source can do a: a local source can do
// every action; a commands source the ones the file gives (ready always:
// it waits for /health).
func (t *Target) Supports(a Action) bool {
	if t.src.Faults.Local || a == Ready {
		return true
	}
	_, ok := t.src.Faults.Commands[a]
	return ok
}

// Stalled reports whether p2pfault holds a stall of the source.
func (t *Target) Stalled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faulter.stalled()
}

// Removed reports whether p2pfault removed the source and has not restored it.
func (t *Target) Removed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faulter.removed()
}

// Do acts on the source. Kill and Restore return once the engine is
// killed or started again; Ready waits until it answers /health. An error
// names the source and the action.
func (t *Target) Do(ctx context.Context, a Action) (Result, error) {
	start := time.Now()
	var r Result
	var err error
	if a == Ready {
		t.mu.Lock()
		wait := t.faulter.readyWait()
		t.mu.Unlock()
		r, err = wait(ctx)
	} else {
		t.mu.Lock()
		r, err = t.faulter.do(ctx, a)
		t.mu.Unlock()
	}
	r.Source, r.Action = t.src.Name, a
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.Took = r.At.Sub(start)
	if err != nil {
		return r, fmt.Errorf("%s: %s: %w", t.src.Name, a, err)
	}
	return r, nil
}

// Process is the local process listening on the source's P2P port (its
// pid and session, for the process table).
func (t *Target) Process() (Listener, error) {
	return FindListener(t.src.P2PHost, t.src.P2PPort)
}

// Health asks the source's /health once.
func (t *Target) Health(ctx context.Context) error {
	return health(ctx, t.opts.withDefaults(), t.src.URL)
}

// HealthURL asks base/health once, within timeout, without a proxy: an
// engine of an attach file that is not a source (the decoder).
func HealthURL(ctx context.Context, base string, timeout time.Duration) error {
	return health(ctx, Options{HealthTimeout: timeout, Client: healthClient}.withDefaults(), base)
}

// healthClient is shared so that repeated asks reuse their connections.
var healthClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

func health(ctx context.Context, o Options, base string) error {
	ctx, cancel := context.WithTimeout(ctx, o.HealthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health answered %s", resp.Status)
	}
	return nil
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
			return time.Time{}, fmt.Errorf("%s/health not ready: %v (%w)", base, last, ctx.Err())
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
