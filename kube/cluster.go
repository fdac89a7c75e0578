package kube

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"p2pfault/enginehealth"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
)

// refreshEvery is how often the cluster reads every pod and asks every
// engine's /health (State says what it found).
const refreshEvery = time.Second

// Cluster is an opened Kubernetes cluster.
type Cluster struct {
	cfg     Config
	cs      *clientset
	ex      execer
	book    *book
	sources []*Target
	// decoders are decoder-0..N-1 (or the one "decoder"), in find's order.
	decoders []*Target
	cuts     cuts
}

var (
	_ experiment.Cluster    = (*Cluster)(nil)
	_ experiment.Decoders   = (*Cluster)(nil)
	_ experiment.NetFaulter = (*Cluster)(nil)
)

// Open finds the pods and returns once each is running with an address;
// it then reads them once a second until ctx ends.
func (o Opener) Open(ctx context.Context, env experiment.OpenEnv) (experiment.Cluster, error) {
	return o.open(ctx, env.OutDir, env.OnLog)
}

// OpenCluster is Open with its concrete type: dir is the run's folder
// ("": no record is kept).
func (o Opener) OpenCluster(ctx context.Context, dir string) (*Cluster, error) {
	return o.open(ctx, dir, nil)
}

// open opens the cluster; onLog (if set) is told the pods' events
// (watchEvents).
func (o Opener) open(ctx context.Context, dir string, onLog func(engine, line string)) (*Cluster, error) {
	cfg := o.Config
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cs, rc, err := cfg.client()
	if err != nil {
		return nil, exitcode.Usagef("--kube: %w", err)
	}
	srcs, decs, err := cfg.find(ctx, cs)
	if err != nil {
		return nil, exitcode.AsUsage(err)
	}
	c := &Cluster{cfg: cfg, cs: cs, ex: execer{cs: cs, rc: rc}, book: newBook(dir)}
	for i, p := range srcs {
		t, err := c.target(p, event.SourceName(i), event.RoleSource, i)
		if err != nil {
			return nil, exitcode.AsUsage(err)
		}
		c.sources = append(c.sources, t)
	}
	for i, p := range decs {
		t, err := c.target(p, event.DecoderName(i, len(decs)), event.RoleDecoder, i)
		if err != nil {
			return nil, exitcode.AsUsage(err)
		}
		c.decoders = append(c.decoders, t)
	}
	c.refresh(ctx)
	go experiment.Every(ctx, refreshEvery, func() { c.refresh(ctx) })
	if onLog != nil {
		go c.watchEvents(ctx, onLog)
	}
	return c, nil
}

// target is pod p as the engine name, of role and index.
func (c *Cluster) target(p corev1.Pod, name string, role event.Role, i int) (*Target, error) {
	at, err := c.cfg.placeOf(p)
	if err != nil {
		return nil, err
	}
	t := &Target{c: c, name: name, role: role, index: i, http: &http.Client{Timeout: 2 * time.Second}}
	t.at.Store(at)
	return t, nil
}

// Sources are the sources, in the documented order (byOrder).
func (c *Cluster) Sources() []experiment.Target {
	out := make([]experiment.Target, len(c.sources))
	for i, t := range c.sources {
		out[i] = t
	}
	return out
}

func (c *Cluster) Decoder() experiment.Target { return c.decoders[0] }

// Decoders are the decoders by index, decoder-0 (Decoder) first.
func (c *Cluster) Decoders() []experiment.Target {
	out := make([]experiment.Target, len(c.decoders))
	for i, t := range c.decoders {
		out[i] = t
	}
	return out
}

// Targets are every engine, sources first (tests, doctor).
func (c *Cluster) Targets() []*Target {
	return append(append([]*Target{}, c.sources...), c.decoders...)
}

// Stop leaves the cluster as found: every stalled engine resumed (the
// stall's own end does it; this is the backstop), every cut healed and
// every object the run created deleted. It stops no engine.
func (c *Cluster) Stop(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var first error
	for _, t := range c.Targets() {
		if t.isStalled() {
			if err := t.Continue(ctx); err != nil && first == nil {
				first = err
			}
		}
	}
	if err := c.cuts.healAll(ctx, c); err != nil && first == nil {
		first = err
	}
	return first
}

// refresh reads every pod and asks every engine's /health.
func (c *Cluster) refresh(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range c.Targets() {
		wg.Go(func() { t.refresh(ctx) })
	}
	wg.Wait()
}

// Target is one engine's pod.
type Target struct {
	c     *Cluster
	name  string
	role  event.Role
	index int
	http  *http.Client
	at    atomic.Pointer[place] // a replace moves it to the new pod

	mu       sync.Mutex
	info     event.EngineInfo
	stalled  bool
	lastMain int // the engine's first pid when last read
	seen     int // restarts seen in place (its processes replaced)
	restarts int // the container's restart count, as the pod says
	pods     int // pods it had before this one (replaced)
}

// place is where the engine runs: its pod, container and addresses, and
// its data-parallel ranks (rank r's P2P port at p2pPort + r).
type place struct {
	pod, container, ip string
	httpPort, p2pPort  int
	ranks              int
}

// instance counts the engines the target has had: every pod before this
// one, this container's restarts and the restarts seen in place (t.mu
// held).
func (t *Target) instance() int { return t.pods + t.restarts + t.seen }

// where is the engine's place now.
func (t *Target) where() *place { return t.at.Load() }

var (
	_ experiment.Target = (*Target)(nil)
	_ fault.Reporter    = (*Target)(nil)
	_ fault.NetTarget   = (*Target)(nil)
)

func (t *Target) Name() string         { return t.name }
func (t *Target) Role() event.Role     { return t.role }
func (t *Target) Index() int           { return t.index }
func (t *Target) Pod() string          { return t.where().pod }
func (t *Target) P2PHost() string      { return t.where().ip }
func (t *Target) P2PPort() int         { return t.where().p2pPort }
func (t *Target) LogTail(int) []string { return nil }
func (t *Target) HTTPURL() string {
	w := t.where()
	return "http://" + net.JoinHostPort(w.ip, strconv.Itoa(w.httpPort))
}
func (t *Target) Ports() []int {
	w := t.where()
	return []int{w.httpPort, w.p2pPort}
}
func (t *Target) P2PAddr() string {
	w := t.where()
	return net.JoinHostPort(w.ip, strconv.Itoa(w.p2pPort))
}
func (t *Target) State() event.EngineInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.info
}

func (t *Target) isStalled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stalled
}

// ready asks the engine's /health once.
func (t *Target) ready(ctx context.Context) error {
	return enginehealth.Ask(ctx, t.http, t.HTTPURL())
}

// refresh reads the pod and the engine's health into State: the process
// table's row, with the pod's name, node, phase and restarts.
func (t *Target) refresh(ctx context.Context) {
	w := t.where()
	in := event.EngineInfo{Name: t.name, Role: t.role, Index: t.index, HTTPPort: w.httpPort, P2PPort: w.p2pPort, URL: t.HTTPURL()}
	p, err := t.c.cs.CoreV1().Pods(t.c.cfg.Namespace).Get(ctx, w.pod, metav1.GetOptions{})
	herr := t.ready(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.where() != w {
		return // replaced meanwhile: the next round reads the new pod
	}
	switch {
	case err != nil:
		in.State, in.Health = event.StateUnreachable, "pod "+w.pod+": "+err.Error()
	default:
		t.restarts = restartsOf(*p, w.container)
		in.Restarts = t.instance()
		where := fmt.Sprintf("pod %s on %s, %s, restarts %d", w.pod, or(p.Spec.NodeName, "no node"), p.Status.Phase, t.restarts)
		switch {
		case t.stalled:
			in.State, in.Health = event.StateStopped, where
		case herr != nil:
			in.State, in.Health = event.StateStarting, where+": "+herr.Error()
		default:
			in.State, in.Health = event.StateReady, where+": ok"
		}
	}
	t.info = in
}

// restartsOf is container k's restart count in p's status.
func restartsOf(p corev1.Pod, k string) int {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == k {
			return int(s.RestartCount)
		}
	}
	return 0
}
