// Package doctor checks, without starting a run, what would make that run
// fail in its first minutes: a wrong vllm binary or one whose `serve` does
// not know a flag p2pfault passes, too few GPUs, a taken fixed port, a
// PYTHONHASHSEED that disagrees, no rights for a network fault, an attach
// file whose engines do not answer. It is given the run as the run itself
// would start it (a Plan of runner specs, built by the command line from
// the same flags), so it can never check other command lines than a run
// passes. Each check is a small function returning typed Results; all it
// asks of the host (exec, /proc, sockets, environment) goes through Host,
// so tests drive every check with stand-ins.
package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"p2pfault/attach"
	"p2pfault/fault"
	"p2pfault/runner"
)

// Result is one line of the doctor's report.
type Result struct {
	Check string // what was checked: "vllm", "vllm serve flags", "GPUs", "ports", ...
	OK    bool
	Found string // what was found
	Fix   string // how to fix it; empty when OK
	// Warn: passed, but with a caveat the run may meet (what p2pfault
	// could not tell, e.g. whether the CNI enforces NetworkPolicy); shown
	// with MarkWarn and its Fix, not counted by Failed.
	Warn bool
}

// Marks of a passed, a failed and a passed-with-a-warning check.
const (
	MarkOK   = "✓"
	MarkFail = "✗"
	MarkWarn = "⚠"
)

// String is the result as the doctor prints it: mark, check, what was
// found and, for a failure or a warning, "→ how to fix".
func (r Result) String() string {
	mark := MarkOK
	switch {
	case !r.OK:
		mark = MarkFail
	case r.Warn:
		mark = MarkWarn
	}
	s := mark + " " + r.Check + ": " + r.Found
	if (!r.OK || r.Warn) && r.Fix != "" {
		s += " → " + r.Fix
	}
	return s
}

// Failed counts the results that did not pass.
func Failed(rs []Result) int {
	n := 0
	for _, r := range rs {
		if !r.OK {
			n++
		}
	}
	return n
}

// Cluster is one cluster the run would start.
type Cluster struct {
	Label  string        // the arm ("main"), or ARM/CASE for a slice's row
	Arm    string        // the arm it belongs to
	Config runner.Config // what the run passes to runner.Start
	Specs  []runner.Spec // runner.Plan(Config): every engine's argv and environment
}

// Attached is a run on a cluster p2pfault did not start (--attach FILE).
type Attached struct {
	Path string
	// Fits checks the run's case or timeline against the opened cluster
	// as the run does before it starts (a step needing an action the file
	// gives no command for); nil checks nothing.
	Fits func(*attach.Cluster) error
}

// Plan is the run to check.
type Plan struct {
	Clusters []Cluster // every cluster the run starts, in order
	// AtOnce is how many clusters run at the same time: the first AtOnce
	// share the GPUs at the peak (the arms of a run; a slice's rows,
	// --parallel at a time, all alike).
	AtOnce int
	Kinds  []string  // the fault kinds the run's timelines fire
	Attach *Attached // nil: the run launches its engines
}

// Host is everything the checks ask of the machine.
type Host struct {
	LookPath  func(file string) (string, error)
	Exec      func(ctx context.Context, path string, args ...string) ([]byte, error) // combined output
	LookupEnv func(key string) (string, bool)
	// PortFree and PortHolder say whether a port can be bound, and who
	// holds it when not (ok false when /proc does not tell).
	PortFree   func(port int) bool
	PortHolder func(port int) (pid int, comm string, ok bool)
	Kind       func(name string) (*fault.Kind, bool) // the fault registry
	LoadAttach func(path string) (*attach.File, error)
	OpenAttach func(ctx context.Context, f *attach.File) (*attach.Cluster, error)
	Listener   func(host string, port int) (attach.Listener, error) // who listens, from /proc
	ProcEnv    func(pid int) ([]string, error)                      // a process's environment at exec
	// Orphans lists p2pfault's host state whose owner is gone
	// (runner.Orphans); nil checks nothing.
	Orphans func() ([]string, error)
}

// ExecTimeout bounds each program a check runs: `vllm serve --help`
// imports torch, which takes tens of seconds on a cold cache.
const ExecTimeout = 3 * time.Minute

// System is the real host.
func System() Host {
	return Host{
		LookPath:   exec.LookPath,
		Exec:       runProgram,
		LookupEnv:  os.LookupEnv,
		PortFree:   runner.PortFree,
		PortHolder: runner.PortHolder,
		Kind:       fault.Lookup,
		LoadAttach: attach.Load,
		OpenAttach: func(ctx context.Context, f *attach.File) (*attach.Cluster, error) {
			// No guards, no stall record: the doctor faults nothing.
			return attach.Open(ctx, f, attach.Options{})
		},
		Listener: attach.FindListener,
		ProcEnv:  attach.ProcEnv,
		Orphans:  systemOrphans,
	}
}

// runProgram runs path in a process group of its own with stdin closed
// and returns its combined output; on timeout the whole group is killed
// (by its id), so a program that forked leaves nothing behind.
func runProgram(ctx context.Context, path string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ExecTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() == context.DeadlineExceeded {
		return out, fmt.Errorf("%s %s: no answer within %s", path, strings.Join(args, " "), ExecTimeout)
	}
	return out, err
}

// Run runs every check that applies to p, in the order a user fixes
// things: binaries, their flags, GPUs, ports, PYTHONHASHSEED, network
// rights, what a dead run left on the host, the attached cluster.
func Run(ctx context.Context, p Plan, h Host) []Result {
	var rs []Result
	rs = append(rs, Engines(ctx, h, p.Clusters)...)
	rs = append(rs, GPUs(ctx, h, p)...)
	rs = append(rs, Ports(h, p.Clusters)...)
	rs = append(rs, HashSeed(h, p.Clusters)...)
	rs = append(rs, Network(h, p.Kinds)...)
	rs = append(rs, Orphans(h)...)
	if p.Attach != nil {
		rs = append(rs, Attach(ctx, h, *p.Attach)...)
	}
	return rs
}

// envValue is the last KEY=VALUE of key in env (exec's rule: the last one
// wins).
func envValue(env []string, key string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if k, val, found := strings.Cut(kv, "="); found && k == key {
			v, ok = val, true
		}
	}
	return v, ok
}

// lastLine is the last non-empty line of out, for a program's error.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// plural is "1 engine", "3 engines".
func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
