// Package guard leaves a stalled engine running again when p2pfault dies
// without resuming it, SIGKILL included.
//
// p2pfault starts one guard process per stall, before it sends SIGSTOP. The
// guard runs in a session of its own (so a Ctrl-C to p2pfault's terminal or a
// signal to its process group does not reach it) and blocks reading a pipe
// whose only write end p2pfault holds. A normal resume writes one byte and
// the guard exits without acting. When p2pfault dies in any way, the kernel
// closes the write end, the guard reads EOF and resumes the stall: SIGCONT to
// the stalled session (after checking that it still holds the process that
// was stalled) or the source's resume command.
//
// Why a pipe and not prctl(PR_SET_PDEATHSIG): the death signal fires when
// the forking *thread* exits, which in Go is any thread of the runtime, and
// it is reset by exec of a set-uid binary; EOF on a pipe happens exactly when
// the last holder of the write end is gone. The write end is opened O_CLOEXEC
// (os.Pipe), so engines that p2pfault restarts do not inherit it and cannot
// keep a dead p2pfault's guard waiting.
package guard

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/runner"
	"p2pfault/runner/session"
	"p2pfault/safefile"
)

// Config says how to start a guard and what it resumes.
type Config struct {
	// Argv runs the guard: the program and the arguments before Main's,
	// e.g. {os.Executable(), "guard"} for p2pfault's hidden subcommand, or
	// the test binary with Env selecting Main.
	Argv []string
	Env  []string // set on top of p2pfault's environment
	Log  string   // file the guard appends its lines to; "" discards them

	Source string // the source's name, for the log and errors

	// Either a session to SIGCONT: Sid and the identities of the processes
	// stalled (the guard acts only if one of them is still in the session),
	Sid     int
	Members []runner.ProcID
	// Part: only Members were stopped (one data-parallel rank's engine
	// core): the guard continues them alone, not the whole session.
	Part bool
	// or a command to run (a `commands` source's resume argv, placeholders
	// already filled), with its timeout.
	Resume        []string
	ResumeTimeout time.Duration
}

// ReadyTimeout bounds how long Start waits for the guard to be in place.
const ReadyTimeout = 10 * time.Second

// Guard is a running guard process, seen from p2pfault.
type Guard struct {
	cmd     *exec.Cmd
	release *os.File // write end of the pipe the guard waits on
	done    chan struct{}
	waitErr error
	id      runner.ProcID
	once    sync.Once
}

// Start starts a guard for cfg and returns once it is waiting, so a stall
// sent after Start returns is covered.
func Start(cfg Config) (*Guard, error) {
	args, err := guardArgs(cfg)
	if err != nil {
		return nil, err
	}
	relR, relW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guard for %s: %w", cfg.Source, err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		relR.Close()
		relW.Close()
		return nil, fmt.Errorf("guard for %s: %w", cfg.Source, err)
	}
	var out *os.File
	if cfg.Log != "" {
		out, err = safefile.Append(cfg.Log, safefile.ReportPerm)
		if err != nil {
			relR.Close()
			relW.Close()
			readyR.Close()
			readyW.Close()
			return nil, fmt.Errorf("guard for %s: log: %w", cfg.Source, err)
		}
		defer out.Close()
	}
	cmd := exec.Command(cfg.Argv[0], args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Dir = "/" // holds no folder busy (the run's folder may be removed)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{relR, readyW} // fd 3, fd 4
	// A session of its own: no terminal, no signal meant for p2pfault's
	// process group. No Pdeathsig: it must outlive p2pfault.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	relR.Close()
	readyW.Close()
	if err != nil {
		relW.Close()
		readyR.Close()
		return nil, fmt.Errorf("start guard for %s: %w", cfg.Source, err)
	}
	g := &Guard{cmd: cmd, release: relW, done: make(chan struct{})}
	go func() { g.waitErr = cmd.Wait(); close(g.done) }()
	if st, err := session.Stat(cmd.Process.Pid); err == nil {
		g.id = runner.ProcID{Pid: st.Pid, StartTicks: st.StartTicks}
	}
	if err := waitReady(cfg, readyR); err != nil {
		g.kill()
		return nil, err
	}
	return g, nil
}

// guardArgs checks cfg and returns the guard command's arguments after
// its program: what it watches (a session and its stopped members) or
// what it runs (a resume command, with its timeout).
func guardArgs(cfg Config) ([]string, error) {
	if len(cfg.Argv) == 0 {
		return nil, errors.New("guard: no command to run the guard")
	}
	if (cfg.Sid == 0) == (len(cfg.Resume) == 0) {
		return nil, fmt.Errorf("guard for %s: give a session or a resume command, not both or neither", cfg.Source)
	}
	if cfg.Sid != 0 {
		if err := session.Guard(cfg.Sid); err != nil {
			return nil, fmt.Errorf("guard for %s: %w", cfg.Source, err)
		}
		if len(cfg.Members) == 0 {
			return nil, fmt.Errorf("guard for %s: no stalled process given for session %d", cfg.Source, cfg.Sid)
		}
	}
	args := append([]string{}, cfg.Argv[1:]...)
	args = append(args, "--source", cfg.Source)
	if cfg.Sid != 0 {
		args = append(args, "--sid", strconv.Itoa(cfg.Sid))
		for _, m := range cfg.Members {
			args = append(args, "--member", fmt.Sprintf("%d:%d", m.Pid, m.StartTicks))
		}
		if cfg.Part {
			args = append(args, "--part")
		}
		return args, nil
	}
	t := cfg.ResumeTimeout
	if t <= 0 {
		t = time.Minute
	}
	args = append(args, "--timeout", t.String(), "--")
	return append(args, cfg.Resume...), nil
}

// waitReady waits, up to ReadyTimeout, for the guard to write "ready" on
// its fd 4 (readyR's other end) once it waits on fd 3; EOF first means it
// failed (its reason is in its log). It closes readyR.
func waitReady(cfg Config, readyR *os.File) error {
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 16)
		n, err := io.ReadAtLeast(readyR, b, len("ready"))
		readyR.Close()
		if err != nil || string(b[:n]) != "ready" {
			ready <- fmt.Errorf("guard for %s did not get ready (see %s): %v", cfg.Source, logName(cfg.Log), err)
			return
		}
		ready <- nil
	}()
	select {
	case err := <-ready:
		return err
	case <-time.After(ReadyTimeout):
		return fmt.Errorf("guard for %s not ready after %v", cfg.Source, ReadyTimeout)
	}
}

func logName(p string) string {
	if p == "" {
		return "no log"
	}
	return p
}

// ID is the guard process's identity, for the stall record.
func (g *Guard) ID() runner.ProcID { return g.id }

// Pid is the guard process's pid.
func (g *Guard) Pid() int { return g.cmd.Process.Pid }

// Release tells the guard that the stall was resumed normally: it exits
// without acting. Release waits for it to exit (killing it after 2 s).
func (g *Guard) Release() error {
	var err error
	g.once.Do(func() {
		_, err = g.release.Write([]byte{'r'})
		g.release.Close()
	})
	select {
	case <-g.done:
	case <-time.After(2 * time.Second):
		g.kill()
		return fmt.Errorf("guard pid %d did not exit on release; killed", g.Pid())
	}
	return err
}

// Abandon closes p2pfault's end without a release, exactly as p2pfault's
// death would: the guard resumes the stall and exits. It waits for that.
func (g *Guard) Abandon() error {
	g.once.Do(func() { g.release.Close() })
	select {
	case <-g.done:
		return g.waitErr
	case <-time.After(ReadyTimeout):
		g.kill()
		return fmt.Errorf("guard pid %d did not exit after p2pfault's end closed; killed", g.Pid())
	}
}

func (g *Guard) kill() {
	_ = g.cmd.Process.Kill()
	g.once.Do(func() { g.release.Close() })
	<-g.done
}

// Main is the guard process: args are what Start put after Config.Argv.
// fd 3 is the release pipe, fd 4 the ready pipe. It returns the exit code:
// 0 released or resumed, 1 the resume failed, 2 bad arguments.
func Main(args []string) int {
	fs := flag.NewFlagSet("guard", flag.ContinueOnError)
	src := fs.String("source", "", "source name")
	sid := fs.Int("sid", 0, "stalled session")
	timeout := fs.Duration("timeout", time.Minute, "resume command timeout")
	part := fs.Bool("part", false, "continue the members alone, not the whole session")
	var members memberList
	fs.Var(&members, "member", "PID:START_TICKS of a stalled process (repeated)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	resume := fs.Args()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s guard pid %d for %s: %s\n", time.Now().Format(time.RFC3339Nano), os.Getpid(), *src, fmt.Sprintf(format, a...))
	}
	if (*sid == 0) == (len(resume) == 0) {
		logf("want --sid with --member, or -- RESUME-ARGV")
		return 2
	}
	// Not inherited by the resume command: it must not hold the pipes.
	unix.CloseOnExec(3)
	unix.CloseOnExec(4)
	rel := os.NewFile(3, "release")
	ready := os.NewFile(4, "ready")
	if rel == nil || ready == nil {
		logf("no release/ready pipe on fd 3/4")
		return 2
	}
	// The guard must not be ended by the signals that end p2pfault's
	// terminal session; only the pipe decides.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
	if _, err := ready.Write([]byte("ready")); err != nil {
		logf("report ready: %v", err)
		return 2
	}
	ready.Close()
	var b [1]byte
	n, err := rel.Read(b[:])
	if n == 1 && b[0] == 'r' {
		return 0 // resumed normally
	}
	logf("p2pfault's end closed (%v): resuming", err)
	if *sid != 0 {
		sent, err := Continue(*sid, members, *part)
		switch {
		case err != nil:
			logf("SIGCONT session %d: %v", *sid, err)
			return 1
		case *part:
			logf("sent SIGCONT to pids %v of session %d", sent, *sid)
		default:
			logf("sent SIGCONT to session %d: pids %v", *sid, sent)
		}
		return 0
	}
	out, code, err := RunCommand(context.Background(), resume, *timeout)
	logf("ran %q: exit %d, output %q", resume, code, out)
	if err != nil {
		logf("resume command: %v", err)
		return 1
	}
	return 0
}

type memberList []runner.ProcID

func (m *memberList) String() string { return fmt.Sprint(*m) }
func (m *memberList) Set(v string) error {
	p, t, ok := strings.Cut(v, ":")
	pid, err1 := strconv.Atoi(p)
	ticks, err2 := strconv.ParseUint(t, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("want PID:START_TICKS, got %q", v)
	}
	*m = append(*m, runner.ProcID{Pid: pid, StartTicks: ticks})
	return nil
}

// Continue sends SIGCONT to session sid if it still holds one of members
// (same pid, same start time, same session): a session whose stalled
// processes are all gone may be a new one that reuses the id. With part
// (a stall of one rank's engine core) it continues those members alone,
// as the stall stopped them alone. It returns the pids signalled; none
// when nothing of the stall is left.
func Continue(sid int, members []runner.ProcID, part bool) ([]int, error) {
	left := still(sid, members)
	if len(left) == 0 {
		return nil, nil
	}
	var sent []int
	var err error
	if part {
		sent, err = session.SignalMembers(sid, left, unix.SIGCONT)
	} else {
		sent, err = session.Signal(sid, unix.SIGCONT)
	}
	if errors.Is(err, session.ErrNoMembers) {
		return nil, nil
	}
	return sent, err
}

// still are the members that are still the processes stalled, in sid.
func still(sid int, members []runner.ProcID) []session.Proc {
	var out []session.Proc
	for _, m := range members {
		st, err := session.Stat(m.Pid)
		if err == nil && st.Live() && st.StartTicks == m.StartTicks && st.Sid == sid {
			out = append(out, st)
		}
	}
	return out
}

// RunCommand runs argv without a shell, with a timeout, in a process group
// of its own that is killed whole on timeout. It returns the combined output
// (at most 64 KiB, the rest cut), the exit code (-1 when it did not exit by
// itself) and an error for a failure to start, a timeout or a non-zero exit.
func RunCommand(ctx context.Context, argv []string, timeout time.Duration) (string, int, error) {
	if len(argv) == 0 {
		return "", -1, errors.New("empty command")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	// A grandchild that keeps the output pipe open must not hold us.
	cmd.WaitDelay = time.Second
	var out capped
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return out.String(), code, &commandError{msg: fmt.Sprintf("timed out after %v", timeout), err: ctx.Err()}
	case err != nil && code > 0:
		return out.String(), code, &commandError{msg: fmt.Sprintf("exited with status %d", code), err: err}
	case err != nil:
		return out.String(), code, err
	}
	return out.String(), code, nil
}

// commandError says how a command failed in a few words and keeps the
// cause in its chain (context.DeadlineExceeded, *exec.ExitError).
type commandError struct {
	msg string
	err error
}

func (e *commandError) Error() string { return e.msg }
func (e *commandError) Unwrap() error { return e.err }

// capped is a buffer that keeps the first 64 KiB written to it.
type capped struct {
	mu  sync.Mutex
	b   []byte
	cut bool
}

const outputCap = 64 << 10

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := outputCap - len(c.b)
	if len(p) > room {
		c.b = append(c.b, p[:max(room, 0)]...)
		c.cut = true
	} else {
		c.b = append(c.b, p...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return string(c.b) + "\n[output cut at 64 KiB]"
	}
	return string(c.b)
}
