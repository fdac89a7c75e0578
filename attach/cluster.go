package attach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner/session"
)

// Engine is the RunInfo.Engine of a run on an attached cluster.
const Engine = "attached"

// refreshEvery is how often an attached cluster asks every engine's
// /health and looks its local processes up again (State reports what it
// found; the run sends the states once a second too).
const refreshEvery = time.Second

// The cluster as a run sees it: the probe, the checks and the faces see it
// as they see a launched one; the fault kinds act through the Target
// methods below, which take the kind's action through the source's
// executor (local signals or the file's commands). Stop never stops an
// engine: it leaves the cluster as found (Close: every stall resumed,
// removed sources restored only if the file says restore_at_end).
var (
	_ experiment.Opener  = (*Cluster)(nil)
	_ experiment.Cluster = (*Cluster)(nil)
	_ experiment.Target  = (*Target)(nil)
	_ experiment.Ranked  = (*Target)(nil)
	_ fault.Inspectable  = (*Target)(nil)
	_ fault.Replacer     = (*Target)(nil)
)

// Plan checks the run's timeline against what each source can take, before
// anything is done to it: a step a source cannot take is a usage error
// naming the source and the step.
func (c *Cluster) Plan(tl fault.Timeline) (experiment.Plan, error) {
	p := experiment.Plan{Sources: len(c.sources), Decoders: len(c.decoders), Model: c.file.Model, Engine: Engine}
	if len(c.file.Decoders) == 0 && c.file.DecoderP2P.Port == 0 {
		p.NoLinks = fmt.Sprintf("attach %s: decoder.p2p: missing: a link stands in for each source to the decoder and for the decoder to each source, so it must know the decoder's P2P address (decoder.p2p: HOST:PORT, the host and port of its --kv-transfer-config's p2p tier)", c.file.Path)
	}
	var counts []int
	for _, t := range c.sources {
		counts = append(counts, t.Ranks())
	}
	p.Ranks = experiment.PlanRanks(counts)
	for _, s := range tl {
		if s.Pair {
			continue // the experiment refuses a pair on processes
		}
		if s.Decoder {
			if err := c.canTakeOnDecoder(s); err != nil {
				return experiment.Plan{}, err
			}
			continue
		}
		if s.Source >= len(c.sources) {
			continue // Timeline.Check says so
		}
		if err := c.canTake(s); err != nil {
			return experiment.Plan{}, err
		}
	}
	return p, nil
}

// Ranks is the source's data-parallel size from the file (1 without).
func (t *Target) Ranks() int { return max(t.Source().Ranks, 1) }

// canTake says why source s.Source cannot take step s at all: on the
// whole source or the rank it names (rank.go), by what the source's
// faults can do there and what the kind needs of its target.
func (c *Cluster) canTake(s fault.Step) error {
	t := c.sources[s.Source]
	return c.canTakeOn(t, fmt.Sprintf("attach %s: %s (%s)", c.file.Path, event.SourceName(s.Source), t.Name()), s)
}

// canTakeOnDecoder says why the decoder step s names cannot act on it: a
// decoder the file does not list (Timeline.CheckDecoders says so), or
// the one `decoder:`, which the file gives no faults.
func (c *Cluster) canTakeOnDecoder(s fault.Step) error {
	if s.Source >= len(c.decoders) {
		return nil
	}
	t := c.decoders[s.Source]
	if t.faulter == nil {
		return exitcode.Usagef("%s: attach %s: its decoder is probed and watched, never faulted: list it under `decoders:` with its faults, as a source's", s, c.file.Path)
	}
	return c.canTakeOn(t, fmt.Sprintf("attach %s: %s (%s)", c.file.Path, t.Name(), t.src.Name), s)
}

// canTakeOn says why engine t cannot take step s (where names it).
func (c *Cluster) canTakeOn(t *Target, where string, s fault.Step) error {
	k := s.Kind
	var target fault.Target = t
	if s.OnRank {
		rt, err := t.RankTarget(s.Rank)
		if err != nil {
			return exitcode.Usagef("%s: %s: %v (timeline step %q)", where, s.TargetName(), err, s.String())
		}
		where, target = fmt.Sprintf("%s: %s", where, s.TargetName()), rt
	}
	if _, ours := executors[k.Name]; ours {
		if err := t.cannot(k.Name, s.Grain); err != nil {
			return exitcode.Usagef("%s: %s: %v (timeline step %q)", where, k.Name, err, s.String())
		}
		if k.Name == fault.ActionRemove && c.file.RestoreAtEnd && !t.Supports(fault.ActionRestore) {
			return exitcode.Usagef("%s: restore: restore_at_end is set but the attach file gives no restore command for this source", where)
		}
		return nil
	}
	// A kind attach has no executor for acts through what it needs of the
	// target (its Can says whether an attached source has it).
	if k.Can != nil {
		if err := k.Can(target); err != nil {
			return exitcode.Usagef("%s: %s: %v (timeline step %q)", where, k.Name, err, s.String())
		}
	}
	return nil
}

// Open is the run's hold on the cluster: it asks every engine once, and
// then once a second until ctx ends, so State says what /health and /proc
// say.
func (c *Cluster) Open(ctx context.Context, _ experiment.OpenEnv) (experiment.Cluster, error) {
	c.refresh(ctx, refreshEvery)
	go experiment.Every(ctx, refreshEvery, func() { c.refresh(ctx, refreshEvery) })
	return c, nil
}

// Sources are the sources, in the file's order.
func (c *Cluster) Sources() []experiment.Target {
	out := make([]experiment.Target, len(c.sources))
	for i, t := range c.sources {
		out[i] = t
	}
	return out
}

// Decoder is the file's decoder (the first of its decoders).
func (c *Cluster) Decoder() experiment.Target { return c.decoder }

// Decoders (experiment.Decoders) are every decoder, by index.
func (c *Cluster) Decoders() []experiment.Target {
	out := make([]experiment.Target, len(c.decoders))
	for i, t := range c.decoders {
		out[i] = t
	}
	return out
}

// engines are the sources, then the decoders.
func (c *Cluster) engines() []*Target {
	return append(append([]*Target(nil), c.sources...), c.decoders...)
}

// Stop leaves the cluster as found (Close); it stops no engine. The last
// states the run sends say what /health says then.
func (c *Cluster) Stop(ctx context.Context) error {
	err := c.Close(ctx)
	c.refresh(ctx, refreshEvery)
	return err
}

// refresh updates every engine's cached /health and local process, all at
// once, so a stalled one does not hold the others.
func (c *Cluster) refresh(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, t := range c.engines() {
		wg.Go(func() { t.refresh(ctx, timeout) })
	}
	wg.Wait()
}

// Role is source or decoder.
func (t *Target) Role() event.Role { return t.role }

// Index is the source's index in the file (0 for the decoder).
func (t *Target) Index() int { return t.index }

// HTTPURL is the engine's URL as the file gives it (or, once replaced,
// as its replace command printed it).
func (t *Target) HTTPURL() string { return t.Source().URL }

// P2PHost is the host the decoder is told for the source's P2P address.
func (t *Target) P2PHost() string { return t.Source().P2PHost }

// P2PPort is the source's P2P port.
func (t *Target) P2PPort() int { return t.Source().P2PPort }

// LogTail is empty: p2pfault does not see the output of engines it did
// not start (an engine it restarts logs to OUT/attached-NAME.log).
func (t *Target) LogTail(int) []string { return nil }

// refresh asks /health once and, for a local engine, finds its process
// again if the cached one is gone.
func (t *Target) refresh(ctx context.Context, timeout time.Duration) {
	h := "ok"
	hctx, cancel := context.WithTimeout(ctx, timeout)
	err := t.Health(hctx)
	cancel()
	if err != nil {
		h = shortHealth(err, timeout)
	}
	t.stateMu.Lock()
	t.health = h
	t.stateMu.Unlock()
	t.refreshProc()
}

// refreshProc finds a local engine's process again when the cached one is
// gone (the /proc listener lookup, which scans every process's fds, ~8 ms,
// is the expensive part: only then).
func (t *Target) refreshProc() {
	if !t.local {
		return
	}
	t.stateMu.Lock()
	cached := t.proc
	t.stateMu.Unlock()
	if cached != nil && sameProc(*cached) {
		return
	}
	var proc *session.Proc
	var members []int
	if l, err := t.listener(); err == nil {
		if st, err := session.Stat(l.Pid); err == nil {
			proc = &st
			members, _ = session.Live(st.Sid)
		}
	}
	t.stateMu.Lock()
	t.proc, t.members = proc, members
	t.stateMu.Unlock()
}

// listener is the local process behind the engine: a source's on its P2P
// address (the engine core's), the decoder's on its HTTP port.
func (t *Target) listener() (Listener, error) {
	if t.faulter != nil {
		return t.Process()
	}
	s := t.Source()
	return FindListener(s.Host, s.Port)
}

// Environ is the environment a local engine's process was started with
// (/proc/PID/environ of its listener); an error for an engine on another
// host or one whose process cannot be read.
func (t *Target) Environ() ([]string, error) {
	if !t.local {
		return nil, errors.New("not on this host")
	}
	l, err := t.listener()
	if err != nil {
		return nil, err
	}
	return ProcEnv(l.Pid)
}

// answered records that the engine just answered /health (a restart's
// ready wait) and finds its new process.
func (t *Target) answered() {
	t.stateMu.Lock()
	t.health = "ok"
	t.stateMu.Unlock()
	t.refreshProc()
}

// sameProc reports whether p is still the process it was (same pid, same
// start time).
func sameProc(p session.Proc) bool {
	st, err := session.Stat(p.Pid)
	return err == nil && st.Live() && st.StartTicks == p.StartTicks
}

// forget drops the cached process (it was killed or removed).
func (t *Target) forget() {
	t.stateMu.Lock()
	t.proc, t.members = nil, nil
	t.stateMu.Unlock()
}

// State is the engine as p2pfault can know it: for a local engine its
// pid, session and members and whether /proc shows it stopped; for every
// engine its URL and what /health said last. It reads one /proc/PID/stat
// at most, since the faces ask after every fault.
func (t *Target) State() event.EngineInfo {
	t.stateMu.Lock()
	in := event.EngineInfo{
		Name: t.Name(), Role: t.role, Index: t.index, HTTPPort: t.src.Port, P2PPort: t.src.P2PPort,
		Restarts: t.restarts, URL: t.src.URL, Health: t.health,
		Members: append([]int(nil), t.members...),
	}
	proc, busy := t.proc, t.busy
	t.stateMu.Unlock()
	stopped := false
	if proc != nil {
		if st, err := session.Stat(proc.Pid); err == nil && st.Live() && st.StartTicks == proc.StartTicks {
			in.Pid, in.Sid = st.Pid, st.Sid
			in.Uptime = uptime(st.StartTicks)
			stopped = st.Stopped()
		}
	}
	// A stall of one rank stopped its core alone: the front end and the
	// other ranks go on, so the engine is as /health says and that rank is
	// stopped (the runner's reading of a launched engine says the same).
	g, stalled := t.stalledOn()
	switch {
	case busy:
		in.State = event.StateRestarting
	case t.Removed():
		in.State = event.StateRemoved
	case stopped || stalled && !g.OnRank:
		in.State = event.StateStopped
	case in.Health == "ok":
		in.State = event.StateReady
	default:
		in.State = event.StateUnreachable
	}
	if stalled && g.OnRank && (in.State == event.StateReady || in.State == event.StateUnreachable) {
		in.StoppedRanks = []int{g.Rank}
	}
	return in
}

// Host is what the host shows of a local engine (its session, members
// and listeners), so its faults are verified as a launched engine's are;
// an engine faulted by commands (kubectl, ssh) is not on this host.
func (t *Target) Host() (fault.Host, bool) {
	if !t.local {
		return fault.Host{}, false
	}
	t.refreshProc()
	in := t.State()
	if in.Sid <= 0 {
		return fault.Host{}, false
	}
	s := t.Source()
	return fault.Host{
		Sid:  in.Sid,
		Pids: in.Members,
		Addrs: []string{
			net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
			net.JoinHostPort(s.P2PHost, strconv.Itoa(s.P2PPort)),
		},
		Ready: t.Health,
	}, true
}

// The fault.Target side: each action is the kind's own, taken through the
// source's executor; an error it returns is the cluster's
// (fault.NotTaken), its chain kept.

// Stop stalls the source.
func (t *Target) Stop(ctx context.Context) (time.Time, error) { return t.stop(ctx, fault.Grain{}) }

// stop stalls grain g of the source (Stop, and one rank's: rank.go).
func (t *Target) stop(ctx context.Context, g fault.Grain) (time.Time, error) {
	r, err := t.act(ctx, fault.ActionStall, t.taking(fault.ActionStall, g, faulter.doStall))
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	return r.At, nil
}

// Continue resumes the stall. A stall that is no longer held was resumed
// by someone else on the way out (Close, at the run's end): done.
func (t *Target) Continue(ctx context.Context) error { return t.resume(ctx, fault.Grain{}) }

func (t *Target) resume(ctx context.Context, g fault.Grain) error {
	if _, err := t.act(ctx, fault.ActionResume, t.taking(fault.ActionResume, g, faulter.doResume)); err != nil {
		if !t.Stalled() {
			return nil
		}
		return fault.NotTaken(err)
	}
	return nil
}

// Kill kills the source and waits until it answers again.
func (t *Target) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.kill(ctx, fault.Grain{}, signalled)
}

// kill kills grain g of the source (one rank: its core first, then the
// whole engine) and waits until the source answers again.
func (t *Target) kill(ctx context.Context, g fault.Grain, signalled func(time.Time, error)) (time.Time, error) {
	t.setBusy(true)
	defer t.setBusy(false)
	r, err := t.act(ctx, fault.ActionKill, t.taking(fault.ActionKill, g, faulter.doKill))
	// Sent: the command ran, or signals reached the session (a local
	// restart may still fail after that).
	if signalled != nil && (err == nil || len(r.Pids) > 0) {
		signalled(r.At, fault.NotTaken(err))
	}
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	t.forget()
	return t.backUp(ctx)
}

// CanReplace (fault.Replacer): a source faulted by commands can be
// replaced when the file gives it a replace command; a local one cannot
// (localReplace says why).
func (t *Target) CanReplace() error { return t.canReplace(fault.Grain{}) }

func (t *Target) canReplace(g fault.Grain) error {
	if t.faulter == nil {
		return errors.New("the decoder of an attached cluster is not faulted")
	}
	return t.cannot(fault.ActionReplace, g)
}

// Replace runs the source's replace command, which ends its engine and
// starts a new one on new ports, moves the source to the address the
// command printed (its URL, P2P address and the placeholders of its
// commands) and waits until the new engine answers there (the ready
// command, then /health). signalled is told once the command returned.
func (t *Target) Replace(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	return t.replace(ctx, fault.Grain{}, signalled)
}

func (t *Target) replace(ctx context.Context, g fault.Grain, signalled func(time.Time, error)) (time.Time, error) {
	if err := t.canReplace(g); err != nil {
		return time.Time{}, err
	}
	t.setBusy(true)
	defer t.setBusy(false)
	r, err := t.act(ctx, fault.ActionReplace, t.taking(fault.ActionReplace, g, faulter.doReplace))
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	if signalled != nil {
		signalled(r.At, nil)
	}
	t.forget()
	t.moveTo(*r.Moved)
	return t.backUp(ctx)
}

// Terminate removes the source and leaves it down.
func (t *Target) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	return t.terminate(ctx, fault.Grain{}, signalled)
}

// terminate removes grain g of the source (one rank: its core first, then
// the whole engine, which stays down).
func (t *Target) terminate(ctx context.Context, g fault.Grain, signalled func(time.Time, error)) error {
	r, err := t.act(ctx, fault.ActionRemove, t.taking(fault.ActionRemove, g, faulter.doRemove))
	if signalled != nil && (err == nil || len(r.Pids) > 0) {
		signalled(r.At, fault.NotTaken(err))
	}
	t.forget()
	t.refresh(ctx, 500*time.Millisecond) // a removed engine refuses at once
	return fault.NotTaken(err)
}

// Restore brings a removed source back and waits until it answers.
func (t *Target) Restore(ctx context.Context) (time.Time, error) {
	t.setBusy(true)
	defer t.setBusy(false)
	if _, err := t.act(ctx, fault.ActionRestore, t.taking(fault.ActionRestore, fault.Grain{}, faulter.doRestore)); err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	return t.backUp(ctx)
}

// backUp counts a restart that was started (a kill's, a restore's) and
// waits until the source answers again.
func (t *Target) backUp(ctx context.Context) (time.Time, error) {
	t.stateMu.Lock()
	t.restarts++
	t.stateMu.Unlock()
	r, err := t.act(ctx, fault.ActionReady, nil)
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	t.answered()
	return r.At, nil
}

func (t *Target) setBusy(b bool) {
	t.stateMu.Lock()
	t.busy = b
	t.stateMu.Unlock()
}

// uptime is how long a process started startTicks after boot has run.
func uptime(startTicks uint64) time.Duration {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	// USER_HZ is 100 on every Linux p2pfault runs on (sysconf(_SC_CLK_TCK)).
	d := time.Duration((up - float64(startTicks)/100) * float64(time.Second))
	return max(d, 0)
}

// shortHealth is a /health failure in a few words, for the table.
func shortHealth(err error, timeout time.Duration) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "Client.Timeout"):
		return "no answer in " + timeout.String()
	case strings.Contains(msg, "connection refused"):
		return "refused"
	case strings.HasPrefix(msg, "/health answered "):
		return strings.TrimPrefix(msg, "/health answered ")
	}
	if len(msg) > 40 {
		msg = msg[:40] + "…"
	}
	return msg
}
