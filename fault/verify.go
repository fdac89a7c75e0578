package fault

import (
	"context"
	"fmt"
	"strings"

	"p2pfault/verify"
)

// Host is what the host shows of a target, for verification: its session
// and members as /proc lists them, the addresses it listens on, and how
// to ask it whether it is ready.
type Host struct {
	Sid   int
	Pids  []int
	Addrs []string // "host:port": its HTTP and P2P listeners
	// Part, when set, is the pids of the session a fault acts on, alone
	// (one data-parallel rank's engine core): a stall stops those and
	// leaves the rest running, and is verified so.
	Part []int
	// Ready asks the engine once whether it is ready (GET /health
	// answering 200): nil when it is. The target brings it, so fault
	// itself makes no request.
	Ready func(ctx context.Context) error
}

// Inspectable is a Target whose processes p2pfault can read on this host:
// the engines it launched, and an attached engine faulted locally whose
// process is found. Host says what the host shows now; ok is false when
// it cannot be read (a kind's Verify is then skipped: there is nothing it
// could read).
type Inspectable interface {
	Host() (h Host, ok bool)
}

// Reporter is a Target that is no set of processes on this host (an
// engine of the virtual cluster runs as goroutines in p2pfault's own
// process, with no pid to read) and says itself what its own means did
// to it: a kind's Verify polls its Report where it would read /proc. Its
// listeners are verified as any other's, by connects through the run's
// network (Fire.Verifier.Dial). An optional ability, as Inspectable is; a
// target that is both is read through /proc.
type Reporter interface {
	Report() Report
}

// Report is what a Reporter says of its engine now.
type Report struct {
	// Frozen: every goroutine of the engine (of its Part, when set) is
	// held at its next step, the way SIGSTOP holds a process (a stall
	// took effect).
	Frozen bool
	// Running: an instance of the engine runs (frozen or not); false
	// once it was killed or terminated and before it is started again.
	Running bool
	// Instance counts the engine's starts: a kill's or a replace's
	// restart is a new instance, as a restarted process is a new session.
	Instance int
	Addrs    []string // "host:port" of its HTTP and P2P listeners, on the cluster's network
	// Cut is the network fault the cluster holds on the engine's links
	// ("partition", "loss 30%"; "" none): what the network kinds' Verify
	// adds to the connects it makes through the cluster's network.
	Cut string
	// Ready asks the engine once whether it is ready (GET /health): nil
	// when it is.
	Ready func(ctx context.Context) error
	// Part, when set, names the one process of the engine the target is
	// (one data-parallel rank's engine core): Frozen then says whether
	// that one is, and a stall of it is verified as StallPart reads /proc:
	// the part frozen, every other process of Procs running.
	Part  string
	Procs []Proc
	// Listed: Procs are every process of the engine, read where it runs
	// (a pod's, by exec), and a whole engine's verification names which
	// are stopped and which run, so a partial stall shows.
	Listed bool
}

// Proc is one process of a Reporter's engine (its front end, a rank's
// engine core) and whether it is frozen.
type Proc struct {
	Name   string
	Frozen bool
}

// partState says whether r shows its part stopped alone (stall) or no
// longer stopped (resume), naming the processes stopped and running as
// the verification of a part on /proc names its pids.
func (r Report) partState(target string, stall bool) (bool, string) {
	var stopped, running []string
	ok := true
	for _, p := range r.Procs {
		if p.Frozen {
			stopped = append(stopped, p.Name)
		} else {
			running = append(running, p.Name)
		}
		if p.Name == r.Part {
			ok = ok && p.Frozen == stall
		} else if stall {
			ok = ok && !p.Frozen
		}
	}
	ok = ok && (stall || r.Running)
	detail := fmt.Sprintf("%s (instance %d): stopped %s; running %s", target, r.Instance, listOrNone(stopped), listOrNone(running))
	if !ok {
		want := r.Part + " alone stopped"
		if !stall {
			want = r.Part + " running"
		}
		detail += " (want " + want + ")"
	}
	return ok, detail
}

// seen is what a kind's Verify reads of a target before and after its
// action: /proc (an Inspectable) or the target's own Report.
type seen struct {
	host     Host
	report   Report
	reported bool // read from a Reporter, not /proc
}

// observe reads t now; ok is false when nothing can be read (Verify is
// skipped).
func observe(t Target) (seen, bool) {
	if h, ok := host(t); ok {
		return seen{host: h}, true
	}
	if r, ok := t.(Reporter); ok {
		return seen{report: r.Report(), reported: true}, true
	}
	return seen{}, false
}

// addrs are the listeners seen.
func (s seen) addrs() []string {
	if s.reported {
		return s.report.Addrs
	}
	return s.host.Addrs
}

func host(t Target) (Host, bool) {
	in, ok := t.(Inspectable)
	if !ok {
		return Host{}, false
	}
	return in.Host()
}

func effect(r verify.Result) Effect {
	return Effect{OK: r.OK, After: r.After, Detail: r.Detail}
}

// reported polls a Reporter's report until done says its effect is seen.
func reported(f *Fire, kind string, done func(Report) (bool, string)) Effect {
	r := f.Target.(Reporter)
	return effect(f.Verifier.Until(f.Env.Context(), kind, func(context.Context) (bool, string) {
		return done(r.Report())
	}))
}

// verifyStall: every live member of the session is in state T (a
// Reporter: its engine is frozen).
func verifyStall(f *Fire) Effect { return verifyStopped(f, true) }

// verifyResume: no member of the session is in state T any more (a
// Reporter: its engine runs, not frozen).
func verifyResume(f *Fire) Effect { return verifyStopped(f, false) }

// verifyStopped is verifyStall's check (stopped) and verifyResume's (not
// stopped): the two read the same state and want its opposites.
func verifyStopped(f *Fire, stopped bool) Effect {
	kind, whole, part := "resume", f.Verifier.Resume, f.Verifier.ResumePart
	if stopped {
		kind, whole, part = "stall", f.Verifier.Stall, f.Verifier.StallPart
	}
	s, ok := observe(f.Target)
	switch {
	case !ok:
		return Effect{Skipped: true}
	case s.reported && s.report.Part != "":
		return reported(f, kind, func(r Report) (bool, string) { return r.partState(f.Target.Name(), stopped) })
	case s.reported:
		return reported(f, kind, func(r Report) (bool, string) { return r.frozenState(f.Target.Name(), stopped) })
	}
	if len(s.host.Part) > 0 {
		return effect(part(f.Env.Context(), s.host.Sid, s.host.Part))
	}
	return effect(whole(f.Env.Context(), s.host.Sid))
}

// frozenState says whether r shows its engine frozen (stall) or running
// and not frozen (resume), and what it shows.
func (r Report) frozenState(target string, stall bool) (bool, string) {
	ok, detail := r.frozenWords(target, stall)
	if r.Listed {
		detail += "; " + r.procStates()
	}
	return ok, detail
}

// procStates names r's processes stopped and running.
func (r Report) procStates() string {
	var stopped, running []string
	for _, p := range r.Procs {
		if p.Frozen {
			stopped = append(stopped, p.Name)
		} else {
			running = append(running, p.Name)
		}
	}
	return "stopped " + listOrNone(stopped) + "; running " + listOrNone(running)
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func (r Report) frozenWords(target string, stall bool) (bool, string) {
	switch {
	case stall && !r.Frozen:
		return false, fmt.Sprintf("%s (instance %d) is not frozen", target, r.Instance)
	case stall && r.Listed:
		return true, fmt.Sprintf("%s (instance %d) frozen: every process of it stopped", target, r.Instance)
	case stall:
		return true, fmt.Sprintf("%s (instance %d) frozen: every goroutine of it held", target, r.Instance)
	case r.Frozen || !r.Running:
		return false, fmt.Sprintf("%s (instance %d) still frozen or not running", target, r.Instance)
	}
	return true, fmt.Sprintf("%s (instance %d) runs again, not frozen", target, r.Instance)
}

// verifyKill waits for the restart Act started, then verifies every pid
// of the old session is gone and the new session answers its health
// check: timed from the restart's ready (a real engine's restart takes as
// long as loading its model, which says nothing of the kill). A Reporter:
// its instance of before the kill is gone and a new one is ready.
func verifyKill(f *Fire) Effect {
	if !f.hasHost || f.restart == nil {
		return Effect{Skipped: true}
	}
	select {
	case err := <-f.restart:
		if err != nil {
			return Effect{Detail: "the restart failed: " + err.Error()}
		}
	case <-f.Env.Context().Done():
		return Effect{Detail: "the run ended before the restarted source was ready"}
	}
	if f.before.reported {
		old := f.before.report.Instance
		return reported(f, "kill", func(r Report) (bool, string) {
			if !r.Running || r.Instance == old {
				return false, fmt.Sprintf("instance %d of %s still the one running (or none is)", old, f.Target.Name())
			}
			gone := fmt.Sprintf("instance %d of %s gone; instance %d", old, f.Target.Name(), r.Instance)
			if r.Ready != nil {
				if err := r.Ready(f.Env.Context()); err != nil {
					return false, gone + " not ready: " + err.Error()
				}
			}
			return true, gone + " ready"
		})
	}
	now, _ := host(f.Target)
	return effect(f.Verifier.Kill(f.Env.Context(), f.before.host.Sid, f.before.host.Pids, now.Ready))
}

// verifyRemove: the source's ports refuse connections (a Reporter: and no
// instance of it runs).
func verifyRemove(f *Fire) Effect {
	if !f.hasHost {
		return Effect{Skipped: true}
	}
	if f.before.reported {
		if ef := reported(f, "remove", func(r Report) (bool, string) {
			if r.Running {
				return false, fmt.Sprintf("instance %d of %s still runs", r.Instance, f.Target.Name())
			}
			return true, "no instance runs"
		}); !ef.OK {
			return ef
		}
	}
	return effect(f.Verifier.Remove(f.Env.Context(), f.before.addrs()...))
}
