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
// "pid ppid state starttime comm" (starttime: /proc's, in clock ticks
// since boot, which with the pid names one process for good: a pid read
// here may belong to another process by the time it is signalled). It is
// POSIX sh reading /proc with its builtins only (no process per line: a
// node's host has hundreds), so it runs in any image with a shell. Its
// own shell has parent 0 in a container (exec enters the namespace from
// outside), so it is no descendant of init.
const listScript = `echo "init ${` + InitEnv + `:-1}"
for d in /proc/[0-9]*; do
  read -r s 2>/dev/null <"$d/stat" || continue
  c=${s#*\(}; c=${c%\)*}; r=${s##*\) }
  set -- $r
  echo "${d#/proc/} $2 $1 ${20} $c"
done`

// signalScript sends the signal $1 to each process named "pid:starttime"
// in $2..., in one exec: a process whose pid is gone or now names another
// process (its starttime differs) is not signalled but printed "gone PID"
// (a core that died with its front end between the read and the signal is
// what a kill wants, not a failure), and only a process that is still
// there and refused the signal makes it fail. kill is the shell's own.
const signalScript = `sig=$1; shift; rc=0
start() { read -r s 2>/dev/null </proc/$1/stat || return 1; set -- ${s##*\) }; echo "${20}"; }
for a; do
  p=${a%%:*}; want=${a#*:}
  if [ "$(start "$p")" != "$want" ]; then echo "gone $p"; continue; fi
  kill -s "$sig" "$p" 2>/dev/null && continue
  if [ "$(start "$p")" = "$want" ]; then echo "refused $p" >&2; rc=1; else echo "gone $p"; fi
done
exit $rc`

// proc is one process of the container.
type proc struct {
	pid, ppid int
	state     string // /proc's: R, S, D, T (stopped), Z, ...
	start     string // /proc's starttime: with pid, the process's identity
	comm      string
}

func (p proc) String() string { return fmt.Sprintf("pid %d (%s) %s", p.pid, p.comm, p.state) }

// id is how signalScript names p: pid and starttime.
func (p proc) id() string { return strconv.Itoa(p.pid) + ":" + p.start }

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
		f := strings.SplitN(l, " ", 5)
		if len(f) < 5 {
			continue
		}
		pid, e1 := strconv.Atoi(f[0])
		ppid, e2 := strconv.Atoi(f[1])
		if e1 != nil || e2 != nil {
			continue
		}
		all[pid] = proc{pid: pid, ppid: ppid, state: f[2], start: f[3], comm: f[4]}
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
// pause is PID 1 of a pod with shareProcessNamespace: true, every
// container's processes below it.
var inits = []string{"tini", "dumb-init", "catatonit", "pause", "s6-svscan", "runsvdir", "supervisord", "sh", "bash", "dash", "ash"}

// engineIsInit says whether the container's init is the engine itself:
// no init p2pfault knows.
func (ps procs) engineIsInit() bool { return !slices.Contains(inits, ps.init.comm) }

// signallable is why the engine of ps cannot take a signal from inside
// the container now (nil: it can): it is PID 1 (initRefusal), or its init
// has nothing below it (the engine exited, or its init is restarting it).
func (ps procs) signallable(action string) error {
	switch {
	case ps.engineIsInit():
		return ps.initRefusal(action)
	case !ps.alive():
		return fmt.Errorf("no live engine process below the container's init %v to send %s to (the engine exited, or its init is starting it again)", ps.init, action)
	}
	return nil
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

// ids of ps, as signalScript takes them.
func ids(ps []proc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.id()
	}
	return out
}

// stopped says which of the engine's processes are stopped and which are
// not, as the verification words it. A zombie is neither: it has exited,
// and only its parent's wait removes it.
func (ps procs) stopped() (stopped, running []proc) {
	for _, p := range ps.engine() {
		switch p.state {
		case "T", "t":
			stopped = append(stopped, p)
		case "Z", "X":
		default:
			running = append(running, p)
		}
	}
	return stopped, running
}

// alive says whether any process of the engine has not exited: only
// zombies left (killed, not yet reaped) is an engine gone, whose init is
// about to start another.
func (ps procs) alive() bool {
	st, run := ps.stopped()
	return len(st)+len(run) > 0
}

// has says whether p (pid and starttime) is still one of ps.
func (ps procs) has(p proc) bool {
	return slices.ContainsFunc(ps.below, func(q proc) bool { return q.pid == p.pid && q.start == p.start })
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
