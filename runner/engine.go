package runner

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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
	cmd.Env = append(append(os.Environ(), e.spec.Env...), e.c.ownerMark())
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
