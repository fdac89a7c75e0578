package runner

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/engineargs"
	"p2pfault/event"
	"p2pfault/runner/session"
)

// Rank markers: how one data-parallel engine core shows its rank on its
// command line. vLLM's core sets its process title to
// "VLLM::EngineCore_DP<rank>" (vllm/v1/engine/core.py, set_process_title;
// the front end's monitor names it so: "Engine core proc EngineCore_DP0
// died unexpectedly", core_client.py), which /proc/PID/cmdline shows; the
// simulated engine's core carries --data-parallel-rank N (vLLM's own flag
// for one rank started apart).
var vllmCoreTitle = regexp.MustCompile(`EngineCore_DP([0-9]+)\b`)

// CoreRank is the data-parallel rank argv (a /proc/PID/cmdline) marks,
// if any.
func CoreRank(argv []string) (int, bool) {
	if v, ok := engineargs.Value(argv, "--data-parallel-rank"); ok {
		if r, err := strconv.Atoi(v); err == nil && r >= 0 {
			return r, true
		}
	}
	for _, a := range argv {
		if m := vllmCoreTitle.FindStringSubmatch(a); m != nil {
			r, _ := strconv.Atoi(m[1])
			return r, true
		}
	}
	return 0, false
}

// coreRanks maps each live member of ms whose command line marks a
// data-parallel engine core to the rank it marks.
func coreRanks(ms []session.Proc) map[int]int {
	cores := map[int]int{}
	for _, m := range ms {
		if !m.Live() {
			continue
		}
		argv, err := session.Cmdline(m.Pid)
		if err != nil {
			continue
		}
		if r, ok := CoreRank(argv); ok {
			cores[m.Pid] = r
		}
	}
	return cores
}

// rankMembers are the live members of session sid (ms, as read) that make
// up rank r: the core whose command line marks r and every member
// descended from it (a core's own workers), never the front end or a
// sibling core.
func rankMembers(ms []session.Proc, r int) []session.Proc {
	return membersOfRank(ms, coreRanks(ms), r)
}

// membersOfRank is rankMembers with the cores' ranks (coreRanks) read.
func membersOfRank(ms []session.Proc, cores map[int]int, r int) []session.Proc {
	var roots []int
	for pid, got := range cores {
		if got == r {
			roots = append(roots, pid)
		}
	}
	return session.Descendants(ms, roots...)
}

// stoppedRanks are the ranks of an engine of n ranks whose every process
// (its core and the core's descendants) is stopped, given its live session
// members ms and their cores' ranks; whole is true when a stopped member
// belongs to no such rank (its front end, say, or a core stopped while its
// workers run): then the engine as a whole does not go on, and is stopped.
func stoppedRanks(ms []session.Proc, cores map[int]int, n int) (ranks []int, whole bool) {
	covered := map[int]bool{}
	for r := range n {
		rm := membersOfRank(ms, cores, r)
		all := len(rm) > 0
		for _, m := range rm {
			all = all && m.Stopped()
		}
		if !all {
			continue
		}
		ranks = append(ranks, r)
		for _, m := range rm {
			covered[m.Pid] = true
		}
	}
	for _, m := range ms {
		if m.Live() && m.Stopped() && !covered[m.Pid] {
			return nil, true
		}
	}
	return ranks, false
}

// RankTarget is one data-parallel rank of a launched engine: its engine
// core's processes, its own P2P port. A stall stops only them, a
// partition cuts only its port; a kill or a removal ends the whole
// engine, as vLLM's front end does when one engine core dies (it shuts
// the client down: core_client.py, "Engine core proc ... died
// unexpectedly, shutting down client"), and says so.
type RankTarget struct {
	Target
	rank int
}

// Rank is rank r of t's engine; an error when it has no such rank.
func (t Target) Rank(r int) (RankTarget, error) {
	n := t.Spec().RankCount()
	if r < 0 || r >= n {
		return RankTarget{}, fmt.Errorf("%s has no rank %d: its data-parallel size is %d (ranks 0-%d)", t.Name(), r, n, n-1)
	}
	return RankTarget{Target: t, rank: r}, nil
}

// Name is "source-0/rank1".
func (t RankTarget) Name() string { return event.RankName(t.Index(), t.rank) }

// P2PPort is the rank's own P2P port: the engine's base + rank.
func (t RankTarget) P2PPort() int { return t.Engine.P2PPort() + t.rank }

// Members are the live processes of the rank now, and the engine's
// session id.
func (t RankTarget) Members() (sid int, ms []session.Proc, err error) {
	_, sid, ok := t.Session()
	if !ok {
		return 0, nil, t.notRunning()
	}
	all, err := session.Members(sid)
	if err != nil {
		return 0, nil, err
	}
	ms = rankMembers(all, t.rank)
	if len(ms) == 0 {
		return sid, nil, fmt.Errorf("no process of session %d is the engine core of rank %d (none marks it on its command line)", sid, t.rank)
	}
	return sid, ms, nil
}

// Stop SIGSTOPs the rank's processes only and returns once /proc shows
// them stopped (session.Stop with the rank's members: its guard, and a
// stall whole or not at all).
func (t RankTarget) Stop(ctx context.Context) (time.Time, error) {
	sid, ms, err := t.Members()
	if err != nil {
		return time.Time{}, err
	}
	at, _, err := session.Stop(ctx, sid, ms)
	return at, err
}

// Continue SIGCONTs the rank's processes and returns once none is
// stopped.
func (t RankTarget) Continue(ctx context.Context) error {
	sid, ms, err := t.Members()
	if err != nil {
		return err
	}
	pids, err := session.SignalMembers(sid, ms, unix.SIGCONT)
	if err != nil {
		return fmt.Errorf("session %d: %w", sid, err)
	}
	return session.WaitContinued(ctx, pids)
}

// Kill SIGKILLs the rank's core first (what its death looks like to the
// front end), then, since vLLM takes the whole engine down when one core
// dies, ends the whole session and restarts the engine on the same ports.
func (t RankTarget) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.killThen(ctx, t.Engine.Restart, signalled)
}

// Replace is Kill onto new ports (the engine's Replace).
func (t RankTarget) Replace(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.killThen(ctx, t.Engine.Replace, signalled)
}

// Terminate SIGTERMs the rank's core, then the whole engine, which stays
// down until Restore (one core's exit ends the engine).
func (t RankTarget) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	if _, _, ok := t.Session(); !ok {
		return t.notRunning()
	}
	return t.Engine.Remove(ctx, t.coreThenSession(unix.SIGTERM, signalled, unix.SIGCONT))
}

// killThen for a rank: the core is killed at once, then the engine goes
// the way of Target.killThen (its session SIGKILLed, restarted).
func (t RankTarget) killThen(ctx context.Context, restart func(context.Context, EndFunc) error, signalled func(time.Time, error)) (time.Time, error) {
	if _, _, ok := t.Session(); !ok {
		return time.Time{}, t.notRunning()
	}
	if err := restart(ctx, t.coreThenSession(unix.SIGKILL, signalled)); err != nil {
		return time.Time{}, err
	}
	return t.ReadyAt(), nil
}

// coreThenSession is the EndFunc of a rank's kill and removal: sig to the
// rank's core first (what its death looks like to the front end), its time
// and error told to signalled (if set), then sig and each of then to the
// whole session, as vLLM's front end ends the engine when a core dies.
func (t RankTarget) coreThenSession(sig unix.Signal, signalled func(time.Time, error), then ...unix.Signal) EndFunc {
	return func(sid int) error {
		_, ms, err := t.Members()
		at := time.Now()
		if err == nil {
			_, err = session.SignalMembers(sid, ms, sig)
		}
		if signalled != nil {
			signalled(at, err)
		}
		return signal(sig, nil, then...)(sid)
	}
}

// Ports are the rank's own P2P port: a partition of one rank cuts only it
// (the engine's HTTP front end and the sibling ranks' ports stay up).
func (t RankTarget) Ports() []int { return []int{t.P2PPort()} }

// P2PAddr is the rank's P2P listener.
func (t RankTarget) P2PAddr() string {
	return net.JoinHostPort(t.P2PHost(), strconv.Itoa(t.P2PPort()))
}

// Pids are the rank's live pids now, in order (nil when it has none).
func (t RankTarget) Pids() []int {
	_, ms, err := t.Members()
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Pid)
	}
	slices.Sort(out)
	return out
}

// CrashCore SIGKILLs rank r's engine core alone and does not restart the
// engine: what follows is the engine's own doing (vLLM's front end ends
// it when a core dies). It returns, with when the signal was sent, once
// the core's death is visible: its pids dead (a zombie's sockets are
// closed) and its P2P port listening no more, so the kernel has sent its
// connections' resets and FINs. A core still alive after
// session.StopWait (or when ctx ends) is an error.
func (t Target) CrashCore(ctx context.Context, r int) (time.Time, error) {
	rt, err := t.Rank(r)
	if err != nil {
		return time.Time{}, err
	}
	sid, ms, err := rt.Members()
	if err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	pids, err := session.SignalMembers(sid, ms, unix.SIGKILL)
	if err != nil {
		return at, err
	}
	ctx, cancel := context.WithTimeout(ctx, session.StopWait)
	defer cancel()
	if err := session.WaitStates(ctx, pids, func(session.Proc) bool { return false }, deathPoll); err != nil {
		return at, fmt.Errorf("%s's core, SIGKILLed: %w", rt.Name(), err)
	}
	for listening(rt.P2PPort()) {
		select {
		case <-ctx.Done():
			return at, fmt.Errorf("%s's core, SIGKILLed and dead: its P2P port %d still listens: %w", rt.Name(), rt.P2PPort(), ctx.Err())
		case <-time.After(deathPoll):
		}
	}
	return at, nil
}

// deathPoll is how often /proc is read while a kill's effect is awaited:
// what follows it (gone's last cut) is timed from the kill, so the wait
// is short.
const deathPoll = time.Millisecond
