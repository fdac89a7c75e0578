package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"p2pfault/event"
	"p2pfault/runner/session"
	"p2pfault/safefile"
)

// intent says what the next exit of an engine's process means.
type intent int

const (
	intentNone    intent = iota // an exit is a crash: state exited
	intentRestart               // ended by Restart
	intentRemove                // ended by Remove
	intentStop                  // ended by the cluster's Stop
)

// Engine is one engine of the cluster: one process (and its children) in a
// session of its own at a time; a restart starts a new session.
type Engine struct {
	c    *Cluster
	spec Spec
	tail *ring

	op sync.Mutex // one Restart, Remove, Restore or stop at a time

	mu       sync.Mutex
	state    event.State
	intent   intent
	proc     *process
	restarts int
	exit     string
}

// process is one start of an engine.
type process struct {
	cmd        *exec.Cmd
	pid, sid   int
	startTicks uint64
	started    time.Time
	readyAt    time.Time
	members    []ProcID      // recorded once ready, for sessions.json
	cmdlines   Cmdlines      // the leader's at start, the members' once ready; replaced, never changed
	done       chan struct{} // closed once reaped; exit is set before
	exit       string
	logsDone   chan struct{} // closed when the output pipe hit EOF
}

// exitStatus is how the process ended, or "" while it runs.
func (p *process) exitStatus() string {
	if !p.reaped() {
		return ""
	}
	return p.exit
}

func (p *process) reaped() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Name is "source-I" or "decoder".
func (e *Engine) Name() string { return e.spec.Name }

// Role is source or decoder.
func (e *Engine) Role() event.Role { return e.spec.Role }

// Index is the source index (0 for the decoder).
func (e *Engine) Index() int { return e.spec.Index }

// Spec is how the engine is started (its current process: a replaced
// engine's ports and argv are the new ones). Its name, role, index and
// P2P host never change; its ports and Args change only under e.mu (and
// e.op), in Replace.
func (e *Engine) Spec() Spec {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.spec
	s.Args = append([]string(nil), s.Args...)
	return s
}

// HTTPPort is the engine's OpenAI-compatible HTTP port.
func (e *Engine) HTTPPort() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.spec.HTTPPort
}

// HTTPURL is the engine's base URL, e.g. http://127.0.0.1:8100.
func (e *Engine) HTTPURL() string {
	return "http://" + net.JoinHostPort(Host, strconv.Itoa(e.HTTPPort()))
}

// P2PHost is the literal host of the engine's P2P identity: a pull names
// the source by exactly this string.
func (e *Engine) P2PHost() string { return e.spec.P2PHost }

// P2PPort is the engine's P2P port.
func (e *Engine) P2PPort() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.spec.P2PPort
}

// LogTail returns up to n of the engine's most recent output lines.
func (e *Engine) LogTail(n int) []string { return e.tail.last(n) }

// LogPath is the file holding all the engine's output, restarts included.
func (e *Engine) LogPath() string { return e.c.logPath(e.spec.Name) }

// Session returns the pid and session id of the engine's current process;
// ok is false when it has none running.
func (e *Engine) Session() (pid, sid int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil || e.proc.reaped() {
		return 0, 0, false
	}
	return e.proc.pid, e.proc.sid, true
}

// Info returns the engine's state, reading /proc for its session's members
// and whether they are stopped: the event stream's own type, so the
// experiment sends it as it is.
func (e *Engine) Info() event.EngineInfo {
	e.mu.Lock()
	in := e.infoLocked()
	p := e.proc
	ranks := e.spec.RankCount()
	e.mu.Unlock()
	if in.Pid == 0 {
		return in
	}
	ms, err := session.Members(p.sid)
	if err != nil {
		return in
	}
	var live []session.Proc
	stopped := 0
	for _, m := range ms {
		if m.Live() {
			live = append(live, m)
			in.Members = append(in.Members, m.Pid)
			if m.Stopped() {
				stopped++
			}
		}
	}
	if stopped == 0 || (in.State != event.StateReady && in.State != event.StateStarting) {
		return in
	}
	// Some members stopped, not all, on an engine of several ranks: one
	// rank's stall stops its core alone, and the front end and the other
	// ranks go on, so the engine is not stopped but those ranks are. The
	// cores' command lines are read only then.
	if stopped < len(live) && ranks > 1 {
		if rs, whole := stoppedRanks(live, coreRanks(live), ranks); !whole {
			in.StoppedRanks = rs
			return in
		}
	}
	in.State = event.StateStopped
	return in
}

// infoLocked is the engine's state without what /proc says (members,
// stopped); the caller holds e.mu.
func (e *Engine) infoLocked() event.EngineInfo {
	in := event.EngineInfo{
		Name: e.spec.Name, Role: e.spec.Role, Index: e.spec.Index,
		State: e.state, HTTPPort: e.spec.HTTPPort, P2PPort: e.spec.P2PPort,
		Restarts: e.restarts, Exit: e.exit,
	}
	if p := e.proc; p != nil {
		if !p.reaped() {
			in.Pid, in.Sid = p.pid, p.sid
			in.Uptime = time.Since(p.started)
		}
	}
	return in
}

// ReadyAt is when the engine's current process answered /health (zero
// before it did).
func (e *Engine) ReadyAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil {
		return time.Time{}
	}
	return e.proc.readyAt
}

// changeLocked records a new state and tells OnChange, with the engine's
// state as it is at the change (not read from /proc); the caller holds e.mu.
func (e *Engine) changeLocked(s event.State) {
	e.state = s
	e.c.events.change(e.infoLocked())
}

// start is the first start of the engine, within Start.
func (e *Engine) start(ctx context.Context) error {
	e.op.Lock()
	defer e.op.Unlock()
	p, err := e.launch(nil)
	if err != nil {
		return err
	}
	return e.waitReady(ctx, p)
}

// launch starts a new process of the engine in a session of its own, with
// extra appended to its argv (a restart's). The caller holds e.op.
func (e *Engine) launch(extra []string) (*process, error) {
	if e.c.life.Err() != nil {
		return nil, fmt.Errorf("start %s: %w", e.spec.Name, errStopping)
	}
	logf, err := safefile.Append(e.LogPath(), safefile.ReportPerm)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", e.spec.Name, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: output pipe: %w", e.spec.Name, err)
	}
	launched := e.Spec()
	launched.Args = append(launched.Args, extra...)
	cmd := exec.Command(launched.Path, launched.Args...)
	// The owner's mark last, so it wins over one p2pfault inherited: every
	// process of the engine carries it, and once this p2pfault is gone
	// `cleanup --orphans` knows them for its (runner.Orphans).
	cmd.Env = append(append(os.Environ(), e.spec.Env...), e.c.owner.ID().EnvVar())
	// An *os.File, not an io.Writer: Wait then does not wait for the
	// engine core, which inherits the pipe, to close it.
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	err = e.c.spawn.start(cmd)
	_ = pw.Close()
	if err != nil {
		_ = pr.Close()
		_ = logf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", e.spec.Name, e.spec.Path, err)
	}
	p := &process{
		cmd: cmd, pid: cmd.Process.Pid, sid: cmd.Process.Pid, // Setsid: the leader's pid is the session id
		started: time.Now(), done: make(chan struct{}), logsDone: make(chan struct{}),
	}
	if st, err := session.Stat(p.pid); err == nil {
		p.startTicks = st.StartTicks
	}
	p.cmdlines = ReadCmdlines(p.pid)
	fmt.Fprintf(logf, "==> p2pfault: %s started, pid %d, session %d: %s\n", e.spec.Name, p.pid, p.sid, launched.CommandLine())
	e.mu.Lock()
	if e.proc != nil {
		e.restarts++
	}
	e.proc, e.intent, e.exit = p, intentNone, ""
	e.changeLocked(event.StateStarting)
	e.mu.Unlock()
	e.c.workers.Go(func() { e.readLogs(p, pr, logf) })
	e.c.workers.Go(func() { e.reap(p) })
	_ = e.c.writeSessions()
	return p, nil
}

func (e *Engine) readLogs(p *process, r *os.File, logf *os.File) {
	defer close(p.logsDone)
	defer logf.Close()
	defer r.Close()
	readLines(r, func(line string) {
		e.tail.add(line)
		_, _ = logf.WriteString(line + "\n")
		e.c.events.log(e.spec.Name, line)
	})
}

// reap waits for the process and records how it ended. An exit nobody
// asked for is a crash: the rest of the session (the engine core) is
// orphaned then, so it is killed.
func (e *Engine) reap(p *process) {
	_ = p.cmd.Wait()
	p.exit = describeExit(p.cmd.ProcessState)
	close(p.done)
	e.mu.Lock()
	crashed := e.proc == p && e.intent == intentNone
	if crashed {
		e.exit = p.exit
		e.changeLocked(event.StateExited)
	}
	e.mu.Unlock()
	if crashed {
		_, _ = session.Signal(p.sid, unix.SIGKILL)
	}
	_ = e.c.writeSessions()
}

func describeExit(ps *os.ProcessState) string {
	if ps == nil {
		return "unknown status"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "code " + strconv.Itoa(ps.ExitCode())
}

// healthClient asks /health: a short timeout, and no connection kept, so
// a restarted engine is asked on a connection of its own.
func healthClient() *http.Client {
	return &http.Client{Timeout: HealthTimeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
}

// health asks the engine's GET /health once: nil when it answers 200.
func (e *Engine) health(ctx context.Context, client *http.Client) error {
	url := e.HTTPURL() + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: health request: %w", e.spec.Name, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// Healthy asks the engine once whether it is ready (GET /health answers
// 200), for whoever verifies a restart on the host.
func (e *Engine) Healthy(ctx context.Context) error { return e.health(ctx, healthClient()) }

// healthPoll is how often /health is asked while an engine starts.
const healthPoll = 50 * time.Millisecond

func (e *Engine) waitReady(ctx context.Context, p *process) error {
	timeout := e.c.cfg.ReadyTimeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := healthClient()
	var last error
	for {
		last = e.health(ctx, client)
		if last == nil && !p.reaped() {
			e.markReady(p)
			return nil
		}
		select {
		case <-p.done:
			return e.startError(p, fmt.Errorf("exited with %s before it was ready", p.exit))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return e.startError(p, fmt.Errorf("not ready after %v (last: %v)", timeout, last))
			}
			return e.startError(p, fmt.Errorf("start interrupted: %w", context.Cause(ctx)))
		case <-time.After(healthPoll):
		}
	}
}

func (e *Engine) markReady(p *process) {
	var members []ProcID
	if ms, err := session.Members(p.sid); err == nil {
		for _, m := range ms {
			if m.Live() {
				members = append(members, ProcID{Pid: m.Pid, StartTicks: m.StartTicks})
			}
		}
	}
	cmdlines := ReadCmdlines(pidsOf(members)...)
	e.mu.Lock()
	p.readyAt, p.members, p.cmdlines = time.Now(), members, p.cmdlines.with(cmdlines)
	if e.proc == p && e.state == event.StateStarting {
		e.changeLocked(event.StateReady)
	}
	e.mu.Unlock()
	_ = e.c.writeSessions()
}

// startError names the engine, what went wrong and its last log lines.
func (e *Engine) startError(p *process, err error) error {
	// The last lines may still be in the pipe when the process exits.
	select {
	case <-p.logsDone:
	case <-time.After(time.Second):
	}
	lines := e.tail.last(20)
	if len(lines) == 0 {
		return fmt.Errorf("%s (pid %d): %w; it printed nothing (log %s)", e.spec.Name, p.pid, err, e.LogPath())
	}
	return fmt.Errorf("%s (pid %d): %w; last log lines (all in %s):\n    %s",
		e.spec.Name, p.pid, err, e.LogPath(), strings.Join(lines, "\n    "))
}

// EndFunc ends a session: it signals the session sid (session.Signal
// with SIGKILL, for example). The runner then waits for every process of
// the session to be gone, and sends SIGKILL itself after the grace.
type EndFunc func(sid int) error

// terminate is the default EndFunc: SIGTERM, then SIGCONT so that a
// stalled engine can act on it.
func terminate(sid int) error {
	// A session that must not be signalled is refused once, not once per
	// signal.
	if err := session.Guard(sid); err != nil {
		return err
	}
	var errs []error
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGCONT} {
		// The session may empty between the two: that is success.
		if _, err := session.Signal(sid, sig); err != nil && !errors.Is(err, session.ErrNoMembers) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killWait bounds the wait for a session to empty after SIGKILL, which the
// kernel acts on at once even for stopped processes.
const killWait = 5 * time.Second

// end ends p with endFn (nil: SIGTERM), waits for the session to empty
// within StopGrace (or ctx), then SIGKILLs what is left and waits again.
func (e *Engine) end(ctx context.Context, p *process, endFn EndFunc) error {
	if endFn == nil {
		endFn = terminate
	}
	var sigErr error
	if !p.reaped() {
		if err := endFn(p.sid); err != nil && !errors.Is(err, session.ErrNoMembers) {
			sigErr = err
		}
	}
	gone := func(ctx context.Context) error { return waitGone(ctx, p) }
	if err := session.Drain(ctx, p.sid, e.c.cfg.StopGrace, killWait, gone); err != nil {
		return fmt.Errorf("end %s session %d: %w", e.spec.Name, p.sid, errors.Join(sigErr, err))
	}
	return nil
}

// waitGone waits until p is reaped and its session has no live process.
func waitGone(ctx context.Context, p *process) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("pid %d not reaped: %w", p.pid, ctx.Err())
	}
	return session.WaitGone(ctx, p.sid, 10*time.Millisecond)
}

// begin is the opening every engine operation shares (Restart, Replace,
// Remove, Restore): a context the cluster's Stop also cancels, the
// engine's op lock, and a refusal once the cluster is stopping. what
// names the operation in that refusal. On success the caller defers done.
func (e *Engine) begin(ctx context.Context, what string) (opCtx context.Context, done func(), err error) {
	ctx, cancel := e.c.opContext(ctx)
	e.op.Lock()
	done = func() {
		e.op.Unlock()
		cancel()
	}
	if e.c.life.Err() != nil {
		done()
		return nil, nil, fmt.Errorf("%s %s: %w", what, e.spec.Name, errStopping)
	}
	return ctx, done, nil
}

// Restart ends the engine's session with endFn (nil: SIGTERM, SIGKILL after
// the grace) and starts it again on the same ports in a new session once
// the ports are free, then waits until it is ready.
func (e *Engine) Restart(ctx context.Context, endFn EndFunc) error {
	return e.restart(ctx, endFn, "restart", false)
}

// Replace is Restart on new ports: it ends the engine's session with endFn
// (nil: SIGTERM, SIGKILL after the grace) and starts a new engine in its
// place on new ports, HTTP and P2P, drawn from the cluster's pool of free
// ports, in a new session (recorded in sessions.json as a restart is),
// then waits until it is ready. From the moment the new ports are drawn
// the engine's ports, URL, state and command line are the new engine's.
func (e *Engine) Replace(ctx context.Context, endFn EndFunc) error {
	return e.restart(ctx, endFn, "replace", true)
}

// restart is Restart and Replace: what names it in errors, newPorts moves
// the engine to new ports between the end and the new start.
func (e *Engine) restart(ctx context.Context, endFn EndFunc, what string, newPorts bool) error {
	ctx, done, err := e.begin(ctx, what)
	if err != nil {
		return err
	}
	defer done()
	e.mu.Lock()
	p := e.proc
	e.intent = intentRestart
	e.changeLocked(event.StateRestarting)
	e.mu.Unlock()
	if p != nil {
		if err := e.end(ctx, p, endFn); err != nil {
			return e.failRestart(fmt.Errorf("%s %s: %w", what, e.spec.Name, err))
		}
	}
	if newPorts {
		if err := e.movePorts(); err != nil {
			return e.failRestart(fmt.Errorf("%s %s: %w", what, e.spec.Name, err))
		}
	}
	return e.relaunch(ctx, what)
}

// movePorts draws the engine's new ports (and the argv naming them) from
// the cluster's pool; the faces see them at once. The caller holds e.op.
func (e *Engine) movePorts() error {
	next, err := e.c.replacementSpec(e)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.spec.HTTPPort, e.spec.P2PPort, e.spec.Args = next.HTTPPort, next.P2PPort, next.Args
	e.changeLocked(event.StateRestarting) // the faces see the new ports
	e.mu.Unlock()
	_ = e.c.writeSessions()
	return nil
}

// Remove ends the engine's session with endFn (nil: SIGTERM, SIGKILL after
// the grace) and leaves it down; Restore brings it back.
func (e *Engine) Remove(ctx context.Context, endFn EndFunc) error {
	ctx, done, err := e.begin(ctx, "remove")
	if err != nil {
		return err
	}
	defer done()
	e.mu.Lock()
	p := e.proc
	if e.state == event.StateRemoved {
		e.mu.Unlock()
		return fmt.Errorf("remove %s: it is already removed", e.spec.Name)
	}
	e.intent = intentRemove
	e.mu.Unlock()
	if p != nil {
		err = e.end(ctx, p, endFn)
	}
	e.mu.Lock()
	if p != nil {
		e.exit = p.exitStatus()
	}
	e.changeLocked(event.StateRemoved)
	e.mu.Unlock()
	_ = e.c.writeSessions()
	if err != nil {
		return fmt.Errorf("remove %s: %w", e.spec.Name, err)
	}
	return nil
}

// Restore starts a removed (or exited) engine again on its ports and waits
// until it is ready.
func (e *Engine) Restore(ctx context.Context) error {
	ctx, done, err := e.begin(ctx, "restore")
	if err != nil {
		return err
	}
	defer done()
	e.mu.Lock()
	state, p := e.state, e.proc
	e.mu.Unlock()
	if state != event.StateRemoved && state != event.StateExited {
		return fmt.Errorf("restore %s: it is %s, not removed", e.spec.Name, state)
	}
	if p != nil && !p.reaped() {
		return fmt.Errorf("restore %s: its pid %d is still running", e.spec.Name, p.pid)
	}
	return e.relaunch(ctx, "restore")
}

// relaunch starts a new process once the engine's ports are free and waits
// for readiness. The caller holds e.op.
func (e *Engine) relaunch(ctx context.Context, what string) error {
	if err := waitPortsFree(ctx, e.spec.Name, e.HTTPPort(), e.P2PPort()); err != nil {
		return e.failRestart(err)
	}
	p, err := e.launch(e.c.restartArgs())
	if err != nil {
		return e.failRestart(fmt.Errorf("%s %s: %w", what, e.spec.Name, err))
	}
	if err := e.waitReady(ctx, p); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// failRestart marks an engine that could not be brought back as exited.
func (e *Engine) failRestart(err error) error {
	e.mu.Lock()
	if e.state == event.StateRestarting || e.state == event.StateRemoved {
		e.exit = "restart failed"
		e.changeLocked(event.StateExited)
	}
	e.mu.Unlock()
	return err
}

// stopForGood ends the engine for the cluster's Stop.
func (e *Engine) stopForGood(ctx context.Context) error {
	e.op.Lock()
	defer e.op.Unlock()
	e.mu.Lock()
	p := e.proc
	e.intent = intentStop
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	err := e.end(ctx, p, nil)
	select {
	case <-p.logsDone:
	case <-time.After(2 * time.Second):
	}
	e.mu.Lock()
	if e.state != event.StateRemoved && e.state != event.StateExited {
		e.exit = p.exitStatus()
		e.changeLocked(event.StateExited)
	}
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stop %s: %w", e.spec.Name, err)
	}
	return nil
}
