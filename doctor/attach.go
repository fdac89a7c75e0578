package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"p2pfault/attach"
)

// Attach checks a run's attach file as the run does before it starts:
// the file parses, every engine answers /health, every source's P2P
// address listens and can be faulted the way the file says (attach.Open),
// and the run's steps have a way to act on their sources. It adds the
// PYTHONHASHSEED of the engines on this host, read from /proc.
func Attach(ctx context.Context, h Host, a Attached) []Result {
	f, err := h.LoadAttach(a.Path)
	if err != nil {
		return []Result{{Check: "attach", Found: err.Error(), Fix: "correct the file (see the README's \"Attaching to a running cluster\")"}}
	}
	var names []string
	for _, s := range f.Sources {
		names = append(names, s.Name)
	}
	rs := []Result{{Check: "attach", OK: true, Found: fmt.Sprintf("%s: model %s, decoder %s, %s (%s)",
		a.Path, f.Model, f.Decoder.URL, plural(len(f.Sources), "source"), strings.Join(names, ", "))}}
	cl, err := h.OpenAttach(ctx, f)
	if err != nil {
		for _, p := range problems(err) {
			rs = append(rs, Result{Check: "attach", Found: p, Fix: "start that engine, or correct its entry in " + a.Path})
		}
		return append(rs, attachedSeeds(h, f)...)
	}
	defer func() { _ = cl.Close(context.Background()) }() // holds no stall: leaves all as found
	rs = append(rs, Result{Check: "attach decoder", OK: true, Found: f.Decoder.URL + " answers /health"})
	for _, s := range f.Sources {
		r := Result{Check: "attach " + s.Name, OK: true, Found: s.URL + " answers /health; P2P " + s.P2P}
		if s.Faults.Local {
			if l, err := h.Listener(s.P2PHost, s.P2PPort); err == nil {
				r.Found += fmt.Sprintf(" held by pid %d (%s) in session %d: local faults", l.Pid, l.Comm, l.Sid)
			}
		} else {
			var acts []string
			for _, act := range attach.Actions() {
				if _, ok := s.Faults.Commands[act]; ok {
					acts = append(acts, act)
				}
			}
			r.Found += " listens; faults by command: " + strings.Join(acts, ", ")
		}
		rs = append(rs, r)
	}
	if a.Fits != nil {
		r := Result{Check: "attach steps", OK: true, Found: "every step of the run's case or timeline has a way to act on its source"}
		if err := a.Fits(cl); err != nil {
			r = Result{Check: "attach steps", Found: err.Error(), Fix: "give the source a command for that action in " + a.Path + ", or run a case it supports"}
		}
		rs = append(rs, r)
	}
	return append(rs, attachedSeeds(h, f)...)
}

// problems splits attach.Check's error into its problems, one per engine.
func problems(err error) []string {
	var many interface{ Unwrap() []error }
	if errors.As(err, &many) {
		var ps []string
		for _, e := range many.Unwrap() {
			ps = append(ps, e.Error())
		}
		return ps
	}
	return []string{err.Error()}
}

// attachedSeeds compares the PYTHONHASHSEED of the attached engines that
// run on this host (the environment their front end was started with);
// engines elsewhere cannot be read and are named as not checked.
func attachedSeeds(h Host, f *attach.File) []Result {
	type engine struct {
		name string
		ep   attach.Endpoint
	}
	all := []engine{{"decoder", f.Decoder}}
	for _, s := range f.Sources {
		all = append(all, engine{s.Name, s.Endpoint})
	}
	var got, remote, unfound, unread []string
	seeds := map[string][]string{}
	var order []string
	for _, e := range all {
		if !loopback(e.ep.Host) {
			remote = append(remote, e.name)
			continue
		}
		l, err := h.Listener(e.ep.Host, e.ep.Port)
		if err != nil {
			unfound = append(unfound, e.name)
			continue
		}
		env, err := h.ProcEnv(l.Pid)
		if err != nil {
			unread = append(unread, e.name)
			continue
		}
		v, ok := envValue(env, HashSeedVar)
		if !ok || v == "" {
			v = "unset"
		}
		if _, seen := seeds[v]; !seen {
			order = append(order, v)
		}
		seeds[v] = append(seeds[v], e.name)
		got = append(got, fmt.Sprintf("%s (pid %d)", e.name, l.Pid))
	}
	if len(got) == 0 {
		return nil
	}
	var notes []string
	if len(remote) > 0 {
		notes = append(notes, "not on this host, not checked: "+strings.Join(remote, ", "))
	}
	if len(unfound) > 0 {
		notes = append(notes, "no process found listening for: "+strings.Join(unfound, ", "))
	}
	if len(unread) > 0 {
		notes = append(notes, "environment not readable: "+strings.Join(unread, ", "))
	}
	tail := ""
	if len(notes) > 0 {
		tail = "; " + strings.Join(notes, "; ")
	}
	r := Result{Check: "attach " + HashSeedVar}
	if len(order) == 1 && order[0] != "unset" && order[0] != "random" {
		r.OK = true
		r.Found = fmt.Sprintf("%s=%s in %s%s", HashSeedVar, order[0], strings.Join(got, ", "), tail)
		return []Result{r}
	}
	var parts []string
	for _, v := range order {
		parts = append(parts, fmt.Sprintf("%s: %s", v, strings.Join(seeds[v], ", ")))
	}
	slices.Sort(parts)
	r.Found = fmt.Sprintf("the engines run with different or random seeds (%s)%s: peers with different seeds reject each other's handshake (hash seed mismatch) and no pull hits",
		strings.Join(parts, "; "), tail)
	r.Fix = "restart every engine with one " + HashSeedVar + ", e.g. " + HashSeedVar + "=42"
	return []Result{r}
}

// loopback reports whether host names this machine (attach's rule for
// local faults).
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
