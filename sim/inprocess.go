package sim

// An engine in the test's process: front end and core as goroutines on a
// memnet.Host, so a whole cluster runs inside a testing/synctest bubble on
// the fake clock (issue 25).
//
// Contract (the virtual cluster's experiment.Opener builds on it):
//   - StartInProcess(ctx, args, env, host, logw) starts one engine as
//     `sim serve` does with args (MODEL, then the flags of `sim serve`) and
//     env (the variables the sim reads: VLLM_P2P_HANDSHAKE_TIMEOUT_S,
//     VLLM_LOG_STATS_INTERVAL, PYTHONHASHSEED; the process environment is
//     not read). Its HTTP and P2P listeners and its dials are on host, the
//     link between front end and core is host.Pipe(), and both log to logw.
//     A usage or configuration error returns at once (an exitcode.Error
//     with code Usage, as `sim serve` exits 2); otherwise it returns at once
//     and the engine starts in the background.
//   - Ready is closed once the engine serves HTTP; HTTPAddr, P2PAddr (rank
//     0's) and P2PAddrs (one per --data-parallel-size rank) are set from
//     then on. Done is closed once every goroutine the engine's
//     front end and core wait for has ended; Err then says how it exited
//     (nil after a clean shutdown, ErrKilled after Kill). An engine that
//     fails to start closes Done without Ready.
//   - Freeze/Thaw are SIGSTOP/SIGCONT of the engine's session: every
//     goroutine stops at its next step (its scheduler tick and timers gate
//     on host.Wait, its socket and link I/O block on the host), timers due
//     meanwhile fire late at Thaw, and time.Now has jumped, so the engine's
//     freeze-gap and stale-route mechanisms see the gap a real SIGSTOP
//     makes. Freeze the host, not the engine, to freeze a client on it too.
//   - Kill is SIGKILL: host.Crash (peers' connections reset, listeners
//     close, connects refused) and the engine's goroutines end without a
//     word to anyone; its log ends where it was. It returns at once; Done
//     follows.
//   - Terminate is SIGTERM: the graceful path a real signal takes (the core
//     tells its peers and its front end, the front end stops serving). A
//     frozen engine acts on it at Thaw, as a stopped process does. It waits
//     for Done or ctx. The end of StartInProcess's ctx is a SIGTERM too.
//   - A restart is a new StartInProcess on the same host with the same
//     ports (the flags' --port and the kv-transfer-config's p2p port), after
//     the old one's Done.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
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

// InProcess is one engine running as goroutines (see the contract above).
type InProcess struct {
	host  *memnet.Host
	log   *cutWriter
	ready chan struct{}
	done  chan struct{}
	term  context.CancelFunc // the SIGTERM both the front end and the core receive

	httpAddr string   // set before ready is closed
	p2pAddrs []string // by data-parallel rank, set before ready is closed
	cores    []*inProcessCore
	err      error // set before done is closed
	killed   atomic.Bool
}

// StartInProcess starts an engine in process (see the contract above).
func StartInProcess(ctx context.Context, args []string, env map[string]string, host *memnet.Host, logw io.Writer) (*InProcess, error) {
	cfg, err := parseServe(args, func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	cfg.Engine.Net = host
	cfg.Engine.Gate = host.Wait
	sig, term := context.WithCancel(context.Background())
	p := &InProcess{host: host, log: &cutWriter{w: logw}, ready: make(chan struct{}), done: make(chan struct{}), term: term}
	log := simlog.New(p.log)
	// One core per data-parallel rank, each on its own link, as the
	// front-end process starts one child per rank.
	p.cores = make([]*inProcessCore, max(cfg.DPSize, 1))
	start := func(rank int) (engineCore, *link.Conn, error) {
		frontEnd, coreEnd := host.Pipe()
		core := &inProcessCore{done: make(chan struct{}), link: coreEnd}
		p.cores[rank] = core
		go func() {
			core.err = runCore(sig, coreConfig{Engine: cfg.rankEngine(rank), StartupDelay: cfg.StartupDelay, Rank: rank}, coreEnd, log)
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

// Host is the host the engine runs on.
func (p *InProcess) Host() *memnet.Host { return p.host }

// Freeze stops the engine as SIGSTOP stops its session.
func (p *InProcess) Freeze() { p.host.Freeze() }

// Thaw resumes a frozen engine as SIGCONT does.
func (p *InProcess) Thaw() { p.host.Thaw() }

// Kill ends the engine as SIGKILL does; Done follows.
func (p *InProcess) Kill() {
	p.killed.Store(true)
	p.log.cut()
	p.host.Crash()
	p.term()
}

// KillRank ends data-parallel rank r's core as SIGKILL of its process
// does: its P2P listener closes and its connections reset at once
// (host.CrashPort of its port), and its link to the front end breaks. The
// front end then does what vLLM's does when one core dies: it stops the
// other cores and exits with the failure (Done follows). It must be called
// after Ready, on an engine with a P2P tier.
func (p *InProcess) KillRank(r int) error {
	addrs := p.P2PAddrs()
	if r < 0 || r >= len(addrs) {
		return fmt.Errorf("kill rank %d: the engine has %d data-parallel ranks", r, len(addrs))
	}
	_, port, err := net.SplitHostPort(addrs[r])
	if err != nil {
		return fmt.Errorf("kill rank %d: P2P identity %q: %w", r, addrs[r], err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("kill rank %d: P2P port %q: %w", r, port, err)
	}
	p.host.CrashPort(n)
	return p.cores[r].link.Close()
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
func (p *InProcess) signal() {
	go func() {
		p.host.Wait()
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
	err  error    // runCore's, once done is closed
	link net.Conn // the core's end of its link
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
