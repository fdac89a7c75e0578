package attach

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/fault"
	"p2pfault/runner/session"
)

// One data-parallel rank of an attached source (`ranks: N`): what a
// timeline step on source-0/rank1, the dashboard's rank picker and
// --nemesis-sources 0/1 act on. Its actions are the source's own executors
// on the rank's grain (fault.Grain), so they take the source's lock, its
// guard and its record as a whole-source action does.
//
//   - A local source's rank r is the process listening on its own P2P port
//     (the file's `p2p` port + r: vLLM's engine core of rank r, whose KV
//     connector binds it) and its descendants: a stall SIGSTOPs those alone
//     and a resume SIGCONTs those alone; a partition or loss cuts that port
//     alone. A kill or removal SIGKILLs (SIGTERMs) the rank's core first,
//     then ends the whole session, as vLLM's front end does when one core
//     dies (runner.RankTarget does the same to a launched engine), and a
//     kill restarts the engine from /proc as a whole-source kill does.
//   - A commands source's rank runs the file's commands with {rank} (and
//     {p2p_port} the rank's own port): a command that holds {rank} acts on
//     one rank, one without on the whole source (Source.rankRefusal).

// RankTarget is rank r of the source as the fault kinds act on it; an
// error when the file gives it no such rank.
func (t *Target) RankTarget(r int) (fault.Target, error) {
	n := t.Ranks()
	switch {
	case n <= 1:
		return nil, fmt.Errorf("%s has one data-parallel rank (the attach file gives it no `ranks: N`), so it has no rank %d of its own: name the source", t.Name(), r)
	case r < 0 || r >= n:
		return nil, fmt.Errorf("%s has no rank %d: the attach file gives it %d ranks (0-%d)", t.Name(), r, n, n-1)
	}
	rt := rankTarget{t: t, g: fault.OneRank(r)}
	if t.Local() {
		return localRank{rt}, nil
	}
	return rt, nil
}

// rankTarget is one rank of an attached source: the source's actions on
// the rank's grain.
type rankTarget struct {
	t *Target
	g fault.Grain
}

var (
	_ fault.Replacer    = rankTarget{}
	_ fault.NetTarget   = localRank{}
	_ fault.Inspectable = localRank{}
)

// Name is the source's name and the rank, "pod-a/rank1".
func (r rankTarget) Name() string { return rankName(r.t.Name(), r.g.Rank) }

func rankName(source string, rank int) string { return source + "/rank" + strconv.Itoa(rank) }

func (r rankTarget) Stop(ctx context.Context) (time.Time, error) { return r.t.stop(ctx, r.g) }
func (r rankTarget) Continue(ctx context.Context) error          { return r.t.resume(ctx, r.g) }

func (r rankTarget) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return r.t.kill(ctx, r.g, signalled)
}

func (r rankTarget) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	return r.t.terminate(ctx, r.g, signalled)
}

// Restore brings the whole engine back: one rank's removal took all of it.
func (r rankTarget) Restore(ctx context.Context) (time.Time, error) { return r.t.Restore(ctx) }

func (r rankTarget) CanReplace() error { return r.t.canReplace(r.g) }

func (r rankTarget) Replace(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return r.t.replace(ctx, r.g, signalled)
}

// localRank is one rank of a local source: its port is on this host, and
// its processes are read in /proc.
type localRank struct{ rankTarget }

// port is the rank's own P2P port: the source's base + rank.
func (r localRank) port() int { return r.t.Source().P2PPort + r.g.Rank }

// Ports are the rank's own P2P port: a partition of one rank cuts only it
// (the engine's HTTP front end and the sibling ranks' ports stay up).
func (r localRank) Ports() []int { return []int{r.port()} }

// P2PAddr is the rank's P2P listener.
func (r localRank) P2PAddr() string {
	return net.JoinHostPort(r.t.Source().P2PHost, strconv.Itoa(r.port()))
}

// Host is the source as /proc shows it, the rank's processes as its Part:
// a stall is verified on exactly those pids, a kill on the whole session.
func (r localRank) Host() (fault.Host, bool) {
	h, ok := r.t.Host()
	if !ok {
		return h, false
	}
	f := r.t.faulter.(*localFaulter)
	l, err := f.find()
	if err != nil {
		return h, false
	}
	ms, err := f.rank(l, r.g.Rank)
	if err != nil {
		return h, false
	}
	h.Part = nil
	for _, m := range ms {
		h.Part = append(h.Part, m.Pid)
	}
	slices.Sort(h.Part)
	return h, true
}

// rank is rank r of the local source whose session l holds: the process
// listening on the rank's own P2P port and its descendants (its engine
// core and the core's own workers). A rank that is no process of its own
// (its port held by the front end, or by another session) is refused:
// stopping it would stop more than the rank.
func (f *localFaulter) rank(l Listener, r int) ([]session.Proc, error) {
	s := f.t.Source()
	port := s.P2PPort + r
	rl, err := FindListener(s.P2PHost, port)
	if err != nil {
		return nil, fmt.Errorf("find rank %d's process on its P2P port %d: %w", r, port, err)
	}
	if rl.Sid != l.Sid {
		return nil, fmt.Errorf("rank %d's P2P port %d is held by pid %d in session %d, not by the source's session %d (the one on P2P port %d)", r, port, rl.Pid, rl.Sid, l.Sid, s.P2PPort)
	}
	ms, err := session.Members(l.Sid)
	if err != nil {
		return nil, err
	}
	part := session.Descendants(ms, rl.Pid)
	front, ferr := FindListener(s.Host, s.Port)
	for _, p := range part {
		if p.Pid == l.Sid || (ferr == nil && p.Pid == front.Pid) {
			return nil, fmt.Errorf("pid %d on rank %d's P2P port %d is the engine's front end or its parent (pid %d of session %d), so the source's ranks are not processes of their own and one of them cannot be faulted alone: name the source", rl.Pid, r, port, p.Pid, l.Sid)
		}
	}
	if len(part) == 0 {
		return nil, fmt.Errorf("rank %d's process (pid %d on P2P port %d) is gone", r, rl.Pid, port)
	}
	return part, nil
}

// rankFirst signals the rank of grain g alone with sig, before the whole
// session is ended: what one core's death looks like to the front end
// (vLLM's then ends the engine: core_client.py, "Engine core proc ... died
// unexpectedly, shutting down client"). It does nothing on the whole
// source. It returns when it signalled, and whom.
func (f *localFaulter) rankFirst(l Listener, g fault.Grain, sig unix.Signal) (time.Time, []int, error) {
	if !g.OnRank {
		return time.Time{}, nil, nil
	}
	ms, err := f.rank(l, g.Rank)
	if err != nil {
		return time.Time{}, nil, err
	}
	at := time.Now()
	sent, err := session.SignalMembers(l.Sid, ms, sig)
	return at, sent, err
}

// wholeOnly: the commands of ready and restore act on the whole engine
// (one rank's kill or removal ends all of it, as vLLM does), so they take
// no {rank} (Parse refuses one).
func wholeOnly(a string) bool { return a == fault.ActionReady || a == fault.ActionRestore }

// holdsRank reports whether a command names the rank it acts on.
func holdsRank(argv []string) bool {
	return slices.ContainsFunc(argv, func(w string) bool { return strings.Contains(w, PlaceholderRank) })
}

// rankRefusal is why a commands source cannot run action a's command on
// grain g, nil when it can: a command that holds {rank} acts on one rank,
// one without on the whole source, and a step runs only a command of its
// own grain. A stall is resumed by the resume command of its grain, so a
// stall checks both. A resume undoes the stall in force, as it was made,
// and ready and restore act on the whole engine: they run on any grain.
func (s Source) rankRefusal(a string, g fault.Grain) error {
	if a == fault.ActionResume || wholeOnly(a) {
		return nil
	}
	cmds := []string{a}
	if a == fault.ActionStall {
		cmds = append(cmds, fault.ActionResume)
	}
	for _, c := range cmds {
		argv, ok := s.Faults.Commands[c]
		if !ok {
			continue // a stall without its resume is refused by Parse
		}
		switch has := holdsRank(argv); {
		case g.OnRank && !has:
			return fmt.Errorf("the attach file's %s command for this source has no %s: it acts on the whole source, not on one rank (put %s in it, or name the source)", c, PlaceholderRank, PlaceholderRank)
		case !g.OnRank && has:
			return fmt.Errorf("the attach file's %s command for this source holds %s: it acts on one rank, not on the whole source (name one rank, source-N/rankR)", c, PlaceholderRank)
		}
	}
	return nil
}
