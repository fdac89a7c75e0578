package sim

// An engine in the test's process: front end and cores as goroutines, each
// process on a memnet.Host of its own, so a whole cluster runs inside a
// testing/synctest bubble on the fake clock (issue 25).
//
// Contract (the virtual cluster's experiment.Opener builds on it):
//   - StartInProcess(ctx, args, env, hosts, logw) starts one engine as
//     `sim serve` does with args (MODEL, then the flags of `sim serve`) and
//     env (the variables the sim reads: VLLM_P2P_HANDSHAKE_TIMEOUT_S,
//     VLLM_LOG_STATS_INTERVAL, PYTHONHASHSEED; the process environment is
//     not read). As `sim serve` runs a front-end process and one child
//     process per data-parallel rank's engine core, it runs on hosts (one
//     fabric, so one loopback port namespace): the front end on
//     hosts.FrontEnd() (its HTTP listener), rank r's core on hosts.Core(r)
//     (its P2P listener and dials, and its goroutines' gate), each core's
//     link to the front end a pipe between the two hosts (Host.PipeTo).
//     Both log to logw. A usage or configuration error returns at once (an
//     exitcode.Error with code Usage, as `sim serve` exits 2); otherwise it
//     returns at once and the engine starts in the background.
//   - Ready is closed once the engine serves HTTP; HTTPAddr, P2PAddr (rank
//     0's) and P2PAddrs (one per --data-parallel-size rank) are set from
//     then on. Done is closed once every goroutine the engine's
//     front end and core wait for has ended; Err then says how it exited
//     (nil after a clean shutdown, ErrKilled after Kill). An engine that
//     fails to start closes Done without Ready.
//   - Freeze/Thaw are SIGSTOP/SIGCONT of the engine's session: every host
//     of it freezes, and every goroutine stops at its next step (its
//     scheduler tick and timers gate on its host's Wait, its socket and
//     link I/O block on the host), timers due meanwhile fire late at Thaw,
//     and time.Now has jumped, so the engine's freeze-gap and stale-route
//     mechanisms see the gap a real SIGSTOP makes. FreezeRank/ThawRank are
//     SIGSTOP/SIGCONT of one rank's core process alone: its host freezes
//     (its listener's kernel side goes on: connects wait in the backlog,
//     bytes buffer), the front end and the other cores run on, and the
//     front end's requests routed to that rank wait in its link. Freeze the
//     hosts, not the engine, to freeze a client on them too.
//   - Kill is SIGKILL of the session: every host crashes (peers'
//     connections reset, listeners close, connects refused) and the
//     engine's goroutines end without a word to anyone; its log ends where
//     it was. It returns at once; Done follows. KillRank is SIGKILL of one
//     rank's core: its host crashes; the front end sees its link break and
//     ends the engine, as vLLM's does.
//   - Terminate is SIGTERM: the graceful path a real signal takes (the core
//     tells its peers and its front end, the front end stops serving). A
//     frozen engine acts on it at Thaw, as a stopped process does. It waits
//     for Done or ctx. The end of StartInProcess's ctx is a SIGTERM too.
//   - A restart is a new StartInProcess on the same hosts with the same
//     ports (the flags' --port and the kv-transfer-config's p2p port), after
//     the old one's Done.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"p2pfault/exitcode"
	"p2pfault/memnet"
	"p2pfault/sim/link"
	"p2pfault/sim/simlog"
)

// ErrKilled is an in-process engine's exit after Kill, as a process's
// "signal: killed".
var ErrKilled = errors.New("signal: killed")

// Hosts are the processes an in-process engine runs as, each a
// memnet.Host on one fabric: its front end's and, made as the engine asks
// for them, one per data-parallel rank's engine core. The same Hosts serve
// a restart on the same ports (the same processes again, as far as the
// network is concerned: a partition of them holds), a new Hosts a new
// engine elsewhere.
type Hosts struct {
	fab   *memnet.Fabric
	name  string
	front *memnet.Host

	mu    sync.Mutex
	cores []*memnet.Host // by rank
}

// NewHosts returns the hosts of an engine called name on fab: its front
// end's is named name, rank r's core's name/rankR.
func NewHosts(fab *memnet.Fabric, name string) *Hosts {
	return &Hosts{fab: fab, name: name, front: fab.Host(name)}
}

// FrontEnd is the front end's host: its HTTP listener.
func (h *Hosts) FrontEnd() *memnet.Host { return h.front }

// Core is rank r's engine core's host (made at the first ask).
func (h *Hosts) Core(r int) *memnet.Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.cores) <= r {
		h.cores = append(h.cores, h.fab.Host(fmt.Sprintf("%s/rank%d", h.name, len(h.cores))))
	}
	return h.cores[r]
}

// All are every host made so far: the front end's, then the cores' by
// rank. A network fault of the whole engine acts on each.
func (h *Hosts) All() []*memnet.Host {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*memnet.Host{h.front}, h.cores...)
}

// Partition cuts every host of the engine off from every other host of
// the fabric (a partition of all its ports, both ways) until Heal; its
// links between front end and cores are pipes, which no cut touches.
func (h *Hosts) Partition() {
	for _, x := range h.All() {
		h.fab.Partition(x, nil)
	}
}

// Heal ends Partition and Loss.
func (h *Hosts) Heal() {
	for _, x := range h.All() {
		h.fab.Heal(x, nil)
		h.fab.Loss(x, nil, 0)
	}
}

// Loss makes a fraction of the segments of every host of the engine lost
// (memnet's Fabric.Loss); 0 ends it.
func (h *Hosts) Loss(fraction float64) {
	for _, x := range h.All() {
		h.fab.Loss(x, nil, fraction)
	}
}

// InProcess is one engine running as goroutines (see the contract above).
type InProcess struct {
	hosts *Hosts
	procs []*memnet.Host // this instance's: the front end's host, then each rank's core's
	log   *cutWriter
	ready chan struct{}
	done  chan struct{}
	term  context.CancelFunc // the SIGTERM both the front end and the core receive

	httpAddr string   // set before ready is closed
	p2pAddrs []string // by data-parallel rank, set before ready is closed
	err      error    // set before done is closed
	killed   atomic.Bool
}

// StartInProcess starts an engine in process (see the contract above).
func StartInProcess(ctx context.Context, args []string, env map[string]string, hosts *Hosts, logw io.Writer) (*InProcess, error) {
	cfg, err := parseServe(args, func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	front := hosts.FrontEnd()
	cfg.Engine.Net = front
	sig, term := context.WithCancel(context.Background())
	p := &InProcess{hosts: hosts, procs: []*memnet.Host{front}, log: &cutWriter{w: logw}, ready: make(chan struct{}), done: make(chan struct{}), term: term}
	for r := range max(cfg.DPSize, 1) {
		p.procs = append(p.procs, hosts.Core(r))
	}
	log := simlog.New(p.log)
	// One core per data-parallel rank, each a process of its own on its
	// own link, as the front-end process starts one child per rank.
	start := func(rank int) (engineCore, *link.Conn, error) {
		h := p.coreHost(rank)
		frontEnd, coreEnd := front.PipeTo(h)
		core := &inProcessCore{done: make(chan struct{})}
		ecfg := cfg.rankEngine(rank)
		ecfg.Net, ecfg.Gate = h, h.Wait
		go func() {
			core.err = runCore(sig, coreConfig{Engine: ecfg, StartupDelay: cfg.StartupDelay, Rank: rank}, coreEnd, log)
			close(core.done)
		}()
		log.Info(compAPI, "started engine core %s (in process) for model %s", coreName(rank), cfg.Model)
		return core, link.New(frontEnd), nil
	}
	go func() {
		err := runFrontEnd(sig, cfg, start, p.setReady, log)
		if p.killed.Load() {
			err = ErrKilled
		}
		p.err = err
		term()
		close(p.done)
	}()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				p.signal()
			case <-p.done:
			}
		}()
	}
	return p, nil
}

// parseServe resolves `sim serve` arguments as the command does.
// CheckServe checks a `sim serve` command line (MODEL and its flags) and
// environment as an engine started with them would, starting nothing: the
// usage error it would exit with at once, or nil. p2pfault checks the
// flags it gives every simulated engine with it, so a bad one is said
// once, before any engine starts, not once per engine.
func CheckServe(args []string, getenv func(string) string) error {
	_, err := parseServe(args, getenv)
	return err
}

func parseServe(args []string, getenv func(string) string) (serveConfig, error) {
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, exitcode.AsUsage(err)
	}
	if fs.NArg() != 1 {
		return serveConfig{}, exitcode.Usagef("serve takes exactly one MODEL argument, got %d %q", fs.NArg(), fs.Args())
	}
	return f.resolve(fs.Arg(0), getenv)
}

func (p *InProcess) setReady(http net.Addr, p2pIDs []string) {
	p.httpAddr, p.p2pAddrs = http.String(), p2pIDs
	close(p.ready)
}

// Ready is closed once the engine serves HTTP.
func (p *InProcess) Ready() <-chan struct{} { return p.ready }

// HTTPAddr is the front end's "host:port" ("" before Ready).
func (p *InProcess) HTTPAddr() string {
	select {
	case <-p.ready:
		return p.httpAddr
	default:
		return ""
	}
}

// P2PAddr is rank 0's P2P identity, "host:port" ("" before Ready or
// without a P2P tier).
func (p *InProcess) P2PAddr() string {
	if a := p.P2PAddrs(); len(a) > 0 {
		return a[0]
	}
	return ""
}

// P2PAddrs are every data-parallel rank's P2P identities, by rank (nil
// before Ready; "" each without a P2P tier).
func (p *InProcess) P2PAddrs() []string {
	select {
	case <-p.ready:
		return p.p2pAddrs
	default:
		return nil
	}
}

// Hosts are the hosts the engine runs on.
func (p *InProcess) Hosts() *Hosts { return p.hosts }

// Ranks is how many engine cores the engine runs (its
// --data-parallel-size, 1 without).
func (p *InProcess) Ranks() int { return len(p.procs) - 1 }

// coreHost is rank r's core's host, r in range.
func (p *InProcess) coreHost(r int) *memnet.Host { return p.procs[1+r] }

// rank checks r names one of the engine's cores, for what (an error).
func (p *InProcess) rank(what string, r int) error {
	if r < 0 || r >= p.Ranks() {
		return fmt.Errorf("%s rank %d: the engine has %d data-parallel ranks", what, r, p.Ranks())
	}
	return nil
}

// Freeze stops the engine as SIGSTOP stops its session: every process.
func (p *InProcess) Freeze() {
	for _, h := range p.procs {
		h.Freeze()
	}
}

// Thaw resumes a frozen engine as SIGCONT does: every process.
func (p *InProcess) Thaw() {
	for _, h := range p.procs {
		h.Thaw()
	}
}

// Frozen reports whether every process of the engine is frozen (a stall
// of the whole engine).
func (p *InProcess) Frozen() bool {
	for _, h := range p.procs {
		if !h.Frozen() {
			return false
		}
	}
	return true
}

// FreezeRank stops rank r's engine core alone, as SIGSTOP of its process
// does (see the contract).
func (p *InProcess) FreezeRank(r int) error {
	if err := p.rank("stop", r); err != nil {
		return err
	}
	p.coreHost(r).Freeze()
	return nil
}

// ThawRank resumes rank r's engine core, as SIGCONT of its process does.
func (p *InProcess) ThawRank(r int) error {
	if err := p.rank("continue", r); err != nil {
		return err
	}
	p.coreHost(r).Thaw()
	return nil
}

// Process is one process of a running engine as its state shows.
type Process struct {
	Name   string // "front end", "rank 1's core"
	Rank   int    // the core's rank; -1 for the front end
	Frozen bool
}

// Processes are the engine's processes now: its front end, then each
// rank's core.
func (p *InProcess) Processes() []Process {
	out := make([]Process, len(p.procs))
	for i, h := range p.procs {
		out[i] = Process{Name: "front end", Rank: i - 1, Frozen: h.Frozen()}
		if i > 0 {
			out[i].Name = fmt.Sprintf("rank %d's core", i-1)
		}
	}
	return out
}

// Kill ends the engine as SIGKILL does; Done follows.
func (p *InProcess) Kill() {
	p.killed.Store(true)
	p.log.cut()
	for _, h := range p.procs {
		h.Crash()
	}
	p.term()
}

// KillRank ends data-parallel rank r's core as SIGKILL of its process
// does: its host crashes (its P2P listener closes, its connections reset
// at once), so its link to the front end breaks. The front end then does
// what vLLM's does when one core dies: it stops the other cores and exits
// with the failure (Done follows).
func (p *InProcess) KillRank(r int) error {
	if err := p.rank("kill", r); err != nil {
		return err
	}
	p.coreHost(r).Crash()
	return nil
}

// Terminate sends the engine a SIGTERM and waits until it has exited (or
// ctx ends first, with ctx's error).
func (p *InProcess) Terminate(ctx context.Context) error {
	p.signal()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signal delivers SIGTERM: a stopped process acts on it once continued.
// The front end's handling is what starts the shutdown; a stopped core
// takes its part in it at its own thaw (its goroutines are held at their
// gate and on their host's I/O until then).
func (p *InProcess) signal() {
	go func() {
		p.procs[0].Wait()
		p.term()
	}()
}

// Done is closed once the engine has exited.
func (p *InProcess) Done() <-chan struct{} { return p.done }

// Err is how the engine exited (valid once Done is closed).
func (p *InProcess) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// inProcessCore is the engine core running as goroutines of this process.
type inProcessCore struct {
	done chan struct{}
	err  error // runCore's, once done is closed
}

func (c *inProcessCore) status(d time.Duration) string {
	return exitStatus(c.done, &c.err, d, "link closed, core still running")
}

// stop closes the link, which makes the core disconnect its peers and end;
// unlike a child process it cannot be killed, and needs not be: a core
// whose link is gone ends once its engine has shut down.
func (c *inProcessCore) stop(l *link.Conn, _ *simlog.Logger) {
	_ = l.Close()
	<-c.done
}

// cutWriter is the engine's log; cut makes it end mid-run, as a killed
// process's output does.
type cutWriter struct {
	mu   sync.Mutex
	w    io.Writer
	gone bool
}

func (w *cutWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone {
		return len(b), nil
	}
	return w.w.Write(b)
}

func (w *cutWriter) cut() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
}
