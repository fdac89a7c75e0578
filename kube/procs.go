package kube

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// InitEnv names the process a container's processes descend from when it
// is not PID 1: the one thing a stand-in for a container (the tests' kwok
// node, whose exec runs on the host) sets; in a real container it is unset
// and the tree is PID 1's.
const InitEnv = "P2PFAULT_KUBE_INIT"

// listScript prints the container's init pid and one line per process:
// "pid ppid state comm". It is POSIX sh reading /proc only, so it runs in
// any image with a shell. Its own shell has parent 0 in a container (exec
// enters the namespace from outside), so it is no descendant of init.
const listScript = `echo "init ${` + InitEnv + `:-1}"
for d in /proc/[0-9]*; do
  s=$(cat "$d/stat" 2>/dev/null) || continue
  c=${s#*\(}; c=${c%\)*}; r=${s##*\) }
  set -- $r
  echo "${d#/proc/} $2 $1 $c"
done`

// proc is one process of the container.
type proc struct {
	pid, ppid int
	state     string // /proc's: R, S, D, T (stopped), Z, ...
	comm      string
}

func (p proc) String() string { return fmt.Sprintf("pid %d (%s) %s", p.pid, p.comm, p.state) }

// procs is what listScript printed, reduced to the container's tree: its
// init first, then its descendants by pid.
type procs struct {
	init  proc
	below []proc // every descendant of init
}

// parseProcs reads listScript's output.
func parseProcs(out string) (procs, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "init ") {
		return procs{}, fmt.Errorf("the process list read in the container is not the one asked for: %.80q", out)
	}
	initPid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(lines[0], "init ")))
	if err != nil {
		return procs{}, fmt.Errorf("%s: not a pid: %q", InitEnv, lines[0])
	}
	all := map[int]proc{}
	kids := map[int][]int{}
	for _, l := range lines[1:] {
		f := strings.SplitN(l, " ", 4)
		if len(f) < 4 {
			continue
		}
		pid, e1 := strconv.Atoi(f[0])
		ppid, e2 := strconv.Atoi(f[1])
		if e1 != nil || e2 != nil {
			continue
		}
		all[pid] = proc{pid: pid, ppid: ppid, state: f[2], comm: f[3]}
		kids[ppid] = append(kids[ppid], pid)
	}
	root, ok := all[initPid]
	if !ok {
		return procs{}, fmt.Errorf("the container's init (pid %d) is not running", initPid)
	}
	ps := procs{init: root}
	for todo := kids[initPid]; len(todo) > 0; {
		pid := todo[0]
		todo = append(todo[1:], kids[pid]...)
		ps.below = append(ps.below, all[pid])
	}
	slices.SortFunc(ps.below, func(a, b proc) int { return a.pid - b.pid })
	return ps, nil
}

// inits are the programs that run as a container's PID 1 to start the
// real one as a child (and reap, and forward signals): with one of them
// as init, the engine is below it and a signal from inside reaches it.
var inits = []string{"tini", "dumb-init", "catatonit", "s6-svscan", "runsvdir", "supervisord", "sh", "bash", "dash", "ash"}

// engineIsInit says whether the container's init is the engine itself.
func (ps procs) engineIsInit() bool {
	return !slices.Contains(inits, ps.init.comm) || len(ps.below) == 0
}

// initRefusal is why a signal from inside cannot stop or kill an engine
// that is its container's PID 1: the kernel drops a signal sent from
// inside a PID namespace to its init unless init handles it, and SIGSTOP
// and SIGKILL cannot be handled. Stopping its children only would leave
// the front end serving: a silent partial stall, which p2pfault refuses.
func (ps procs) initRefusal(action string) error {
	return fmt.Errorf("the engine is its container's PID 1 (%s): a %s signal sent from inside the container cannot reach it (the kernel drops signals to a PID namespace's init that it does not handle, and SIGSTOP and SIGKILL cannot be handled), and stopping only its children would leave its front end serving: refused; run the engine under an init (tini, dumb-init, or shareProcessNamespace: true) so it is not PID 1",
		ps.init, action)
}

// engine is every process of the engine: init's descendants.
func (ps procs) engine() []proc { return ps.below }

// pids of ps.
func pids(ps []proc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strconv.Itoa(p.pid)
	}
	return out
}

// stopped says which of the engine's processes are stopped and which are
// not, as the verification words it.
func (ps procs) stopped() (stopped, running []proc) {
	for _, p := range ps.engine() {
		if p.state == "T" || p.state == "t" {
			stopped = append(stopped, p)
		} else {
			running = append(running, p)
		}
	}
	return stopped, running
}

// describe is what the container shows: every process and its state.
func (ps procs) describe() string {
	st, run := ps.stopped()
	list := func(l []proc) string {
		if len(l) == 0 {
			return "none"
		}
		s := make([]string, len(l))
		for i, p := range l {
			s[i] = fmt.Sprintf("%d (%s)", p.pid, p.comm)
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("init %d (%s); stopped %s; running %s", ps.init.pid, ps.init.comm, list(st), list(run))
}
