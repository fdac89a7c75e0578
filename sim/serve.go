package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/exitcode"
	"p2pfault/netenv"
	"p2pfault/sim/link"
	"p2pfault/sim/simlog"
)

// coreStopWait bounds how long the front end waits for its core to exit
// after closing the link, before killing it.
const coreStopWait = 5 * time.Second

// httpShutdownWait bounds how long requests in flight may finish at exit.
const httpShutdownWait = time.Second

func failed(err error) error { return &exitcode.Error{Code: exitcode.Failed, Err: err} }

// runServe is the front-end process: start the engine cores (one per
// data-parallel rank), wait until they are ready, then bind HTTP and serve
// until a signal or a core's death.
func runServe(ctx context.Context, cfg serveConfig, log *simlog.Logger) error {
	return runFrontEnd(ctx, cfg, func(rank int) (engineCore, *link.Conn, error) { return startCore(cfg, rank, log) }, nil, log)
}

// engineCore is the front end's handle on one engine core: a child process
// (coreProc) or, in process, a goroutine (inProcessCore).
type engineCore interface {
	// status describes how the core exited, waiting up to d for it.
	status(d time.Duration) string
	// stop closes the link and waits for the core to end.
	stop(l *link.Conn, log *simlog.Logger)
}

// runFrontEnd is the front end: start cfg.DPSize engine cores (start(rank)
// each), wait until every one is ready, then bind HTTP on cfg.Engine.Net
// (one network for the front end and its cores, as one host's) and serve
// until ctx ends (a signal) or a core's death. ready, when set, is told the
// bound HTTP address and each rank's P2P identity once the engine is ready.
//
// One core's death ends the whole engine, as in vLLM: the front end's
// engine-core monitor (core_client.py MPClient.start_engine_core_monitor:
// "If any die unexpectedly, marks the engine as dead, and shuts down the
// client") shuts every core down, and the API server exits on the
// EngineDeadError that follows.
func runFrontEnd(ctx context.Context, cfg serveConfig, start func(rank int) (engineCore, *link.Conn, error), ready func(http net.Addr, p2pIDs []string), log *simlog.Logger) error {
	if cfg.HashSeedRandom {
		log.Warning(compAPI, "PYTHONHASHSEED is not set: using random hash seed %s; P2P peers with another seed will refuse this engine (hash seed mismatch)", cfg.Engine.HashSeed)
	}
	cores, links, err := startCores(max(cfg.DPSize, 1), start, log)
	if err != nil {
		return failed(err)
	}
	defer stopCores(cores, links, log)
	fe := newFrontEnd(cfg, links, log)

	p2pIDs, err := fe.waitReady(ctx, cores)
	if err != nil || p2pIDs == nil {
		return err
	}

	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	ln, err := netenv.Or(cfg.Engine.Net).Listen("tcp", addr)
	if err != nil {
		log.Error(compAPI, "bind HTTP port %s: %v", addr, err)
		return failed(fmt.Errorf("bind HTTP port %s: %w", addr, err))
	}
	srv := &http.Server{Handler: fe.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), httpShutdownWait)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	if ready != nil {
		ready(ln.Addr(), p2pIDs)
	}
	shown := p2pIDs[0]
	switch {
	case shown == "":
		shown = "none (no p2p tier configured)"
	case len(p2pIDs) > 1:
		// Rank 0's first, as with one rank, then every rank's.
		shown += fmt.Sprintf(" (rank 0; data-parallel ranks 0..%d: %s)", len(p2pIDs)-1, strings.Join(p2pIDs, " "))
	}
	log.Info(compAPI, "engine ready: serving model %s on http://%s, P2P identity %s", cfg.Model, ln.Addr(), shown)

	select {
	case <-ctx.Done():
		log.Info(compAPI, "shutting down on signal%s", signalNamed(ctx))
		return nil
	case <-fe.shutdown:
		log.Info(compAPI, "engine core stopped on a signal: shutting down")
		return nil
	case <-fe.gone:
		if fe.stopping() {
			return nil
		}
		status := cores[fe.goneRank].status(time.Second)
		// vLLM's monitor logs "Engine core proc EngineCore_DP<r> died
		// unexpectedly, shutting down client."
		log.Error(compAPI, "engine core died: Engine core proc %s died unexpectedly (%s), shutting down client and the API server", coreName(fe.goneRank), status)
		return failed(fmt.Errorf("engine core %s died: %s", coreName(fe.goneRank), status))
	}
}

// startCores starts n engine cores in rank order; if one fails to start,
// those already started are stopped.
func startCores(n int, start func(rank int) (engineCore, *link.Conn, error), log *simlog.Logger) ([]engineCore, []*link.Conn, error) {
	cores := make([]engineCore, 0, n)
	links := make([]*link.Conn, 0, n)
	for r := range n {
		c, l, err := start(r)
		if err != nil {
			stopCores(cores, links, log)
			return nil, nil, err
		}
		cores, links = append(cores, c), append(links, l)
	}
	return cores, links, nil
}

// stopCores stops every core at once (each may take coreStopWait).
func stopCores(cores []engineCore, links []*link.Conn, log *simlog.Logger) {
	var wg sync.WaitGroup
	for i, c := range cores {
		wg.Add(1)
		go func() { defer wg.Done(); c.stop(links[i], log) }()
	}
	wg.Wait()
}

// waitReady waits until every core is ready and returns their P2P
// identities by rank; nil and no error when ctx ended first.
func (fe *frontEnd) waitReady(ctx context.Context, cores []engineCore) ([]string, error) {
	ids := make([]string, len(fe.cores))
	for r, c := range fe.cores {
		select {
		case <-ctx.Done():
			fe.log.Info(compAPI, "interrupted during startup%s", signalNamed(ctx))
			return nil, nil
		case m := <-c.startup:
			if m.Type == link.TypeFatal {
				return nil, failed(fmt.Errorf("engine core failed to start: %s", m.Message))
			}
			ids[r] = m.P2PID
		case <-fe.gone:
			return nil, failed(fmt.Errorf("engine core %s exited during startup: %s", coreName(fe.goneRank), cores[fe.goneRank].status(time.Second)))
		}
	}
	return ids, nil
}

// coreProc is the engine-core child process.
type coreProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startCore re-executes this binary as `sim core --data-parallel-rank R`
// on one end of a socketpair: the rank on its command line is how a tool
// finds one rank's process from outside (/proc/PID/cmdline). The child
// stays in our session and process group (a fault signalling the group
// reaches it) and dies with us (Pdeathsig).
func startCore(cfg serveConfig, rank int, log *simlog.Logger) (*coreProc, *link.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("start engine core: socketpair: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "link-front")
	child := os.NewFile(uintptr(fds[1]), "link-core")
	defer child.Close()
	conn, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("start engine core: link: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("start engine core: find own executable: %w", err)
	}
	b, err := json.Marshal(coreConfig{Engine: cfg.rankEngine(rank), StartupDelay: cfg.StartupDelay})
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("start engine core: encode config: %w", err)
	}
	cmd := exec.Command(exe, "sim", "core", coreRankFlag, strconv.Itoa(rank), "--config", string(b))
	cmd.ExtraFiles = []*os.File{child}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("start engine core %s: %w", exe, err)
	}
	log.Info(compAPI, "started engine core %s (pid %d) for model %s", coreName(rank), cmd.Process.Pid, cfg.Model)
	p := &coreProc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, link.New(conn), nil
}

// status describes how the core exited, waiting up to d for it.
func (p *coreProc) status(d time.Duration) string {
	return exitStatus(p.exited, &p.err, d, "link closed, process still running")
}

// exitStatus describes how a core exited, once done is closed (*err is
// then its exit error), or says running if it is still going after d.
func exitStatus(done <-chan struct{}, err *error, d time.Duration, running string) string {
	select {
	case <-done:
		if *err == nil {
			return "exit status 0"
		}
		return (*err).Error()
	case <-time.After(d):
		return running
	}
}

// stop closes the link, which makes the core disconnect its peers and
// exit; a core that does not (it may be stopped) is killed.
func (p *coreProc) stop(l *link.Conn, log *simlog.Logger) {
	_ = l.Close()
	select {
	case <-p.exited:
		return
	case <-time.After(coreStopWait):
	}
	log.Warning(compAPI, "engine core (pid %d) did not exit within %s: killing it", p.cmd.Process.Pid, coreStopWait)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		log.Error(compAPI, "kill engine core (pid %d): %v", p.cmd.Process.Pid, err)
	}
	<-p.exited
}

// signalNamed is ", CAUSE" when what ended ctx says which signal it was
// (p2pfault's own signal handling names it), "" otherwise: a log that
// says which signal stopped an engine tells who sent it.
func signalNamed(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return ": " + c.Error()
	}
	return ""
}
