package experiment

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

	"p2pfault/attach"
	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/runner/session"
)

// attached is a cluster p2pfault did not start (run --attach FILE): the
// probe, the checks and the faces see it as they see a launched one; fault
// kinds act through attach.Target.Do (local signals or the file's
// commands). Stop never stops an engine: it leaves the cluster as found
// (attach.Cluster.Close: every stall resumed, removed sources restored
// only if the file says restore_at_end).
type attached struct {
	c       *attach.Cluster
	sources []Target
	decoder *attachedTarget
	all     []*attachedTarget
}

var _ Cluster = (*attached)(nil)

func newAttached(c *attach.Cluster) *attached {
	a := &attached{c: c}
	for i, s := range c.Sources() {
		t := &attachedTarget{t: s, role: event.RoleSource, index: i, name: s.Name(),
			url: s.Source().URL, httpPort: s.Source().Port, p2pHost: s.Source().P2PHost,
			p2pPort: s.Source().P2PPort, local: s.Local(), health: "not asked yet"}
		a.sources = append(a.sources, t)
		a.all = append(a.all, t)
	}
	d := c.File().Decoder
	a.decoder = &attachedTarget{role: event.RoleDecoder, name: "decoder", url: d.URL, host: d.Host,
		httpPort: d.Port, local: isLoopbackHost(d.Host), health: "not asked yet"}
	a.all = append(a.all, a.decoder)
	return a
}

func (a *attached) Sources() []Target { return append([]Target(nil), a.sources...) }
func (a *attached) Decoder() Target   { return a.decoder }

// Stop leaves the cluster as found; it stops no engine. The last states
// the run sends say what /health says then.
func (a *attached) Stop(ctx context.Context) error {
	err := a.c.Close(ctx)
	a.refresh(ctx, time.Second)
	return err
}

// EnginePoller replaces the launched cluster's engine poller: it asks
// every engine's /health (at once, so a stalled one does not hold the
// others) and refreshes what /proc says of the local ones, then sends
// every state.
func (a *attached) EnginePoller() Poller { return attachedPoller{a: a, every: time.Second} }

type attachedPoller struct {
	a     *attached
	every time.Duration
}

func (p attachedPoller) Run(ctx context.Context, emit func(event.Event)) {
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		p.a.refresh(ctx, p.every)
		emitStates(p.a, emit)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refresh updates every engine's cached /health and local process.
func (a *attached) refresh(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, t := range a.all {
		wg.Go(func() { t.refresh(ctx, timeout) })
	}
	wg.Wait()
}

// attachedTarget is one engine of an attach file. What State reports is
// cached and refreshed by the poller (a /health request, and for a local
// engine the /proc listener lookup, which scans every process's fds, ~8 ms,
// only when the cached process is gone); State itself reads one
// /proc/PID/stat at most, since the faces ask after every fault.
type attachedTarget struct {
	t        *attach.Target // nil for the decoder: it is never faulted
	role     event.Role
	index    int
	name     string
	url      string
	host     string // the URL's host (the decoder's, for its /proc lookup)
	httpPort int
	p2pHost  string
	p2pPort  int
	local    bool

	mu       sync.Mutex
	health   string // "ok" or the last error
	proc     *session.Proc
	members  []int
	restarts int
	busy     string // "restarting" while a kill or restore is under way
}

var _ Target = (*attachedTarget)(nil)

func (t *attachedTarget) Name() string     { return t.name }
func (t *attachedTarget) Role() event.Role { return t.role }
func (t *attachedTarget) Index() int       { return t.index }
func (t *attachedTarget) HTTPURL() string  { return t.url }
func (t *attachedTarget) P2PHost() string  { return t.p2pHost }
func (t *attachedTarget) P2PPort() int     { return t.p2pPort }

// refresh asks /health once and, for a local engine, finds its process
// again if the cached one is gone.
func (t *attachedTarget) refresh(ctx context.Context, timeout time.Duration) {
	h := "ok"
	if err := t.healthOnce(ctx, timeout); err != nil {
		h = shortHealth(err, timeout)
	}
	t.mu.Lock()
	t.health = h
	t.mu.Unlock()
	t.refreshProc()
}

// refreshProc finds a local engine's process again when the cached one is
// gone (the /proc listener lookup is the expensive part: only then).
func (t *attachedTarget) refreshProc() {
	if !t.local {
		return
	}
	t.mu.Lock()
	cached := t.proc
	t.mu.Unlock()
	if cached != nil && sameProc(*cached) {
		return
	}
	var proc *session.Proc
	var members []int
	if l, err := t.findListener(); err == nil {
		if st, err := session.Stat(l.Pid); err == nil {
			proc = &st
			members, _ = session.Live(st.Sid)
		}
	}
	t.mu.Lock()
	t.proc, t.members = proc, members
	t.mu.Unlock()
}

// answered records that the engine just answered /health (a restart's
// ready wait) and finds its new process.
func (t *attachedTarget) answered() {
	t.mu.Lock()
	t.health = "ok"
	t.mu.Unlock()
	t.refreshProc()
}

func (t *attachedTarget) healthOnce(ctx context.Context, timeout time.Duration) error {
	if t.t != nil {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return t.t.Health(ctx)
	}
	return decoderHealth(ctx, t.url, timeout)
}

func (t *attachedTarget) findListener() (attach.Listener, error) {
	if t.t != nil {
		return t.t.Process()
	}
	return attach.FindListener(t.host, t.httpPort)
}

// sameProc reports whether p is still the process it was (same pid, same
// start time).
func sameProc(p session.Proc) bool {
	st, err := session.Stat(p.Pid)
	return err == nil && st.Live() && st.StartTicks == p.StartTicks
}

// forget drops the cached process (it was killed or removed).
func (t *attachedTarget) forget() {
	t.mu.Lock()
	t.proc, t.members = nil, nil
	t.mu.Unlock()
}

// State is the engine as p2pfault can know it: for a local engine its pid,
// session and members and whether /proc shows it stopped; for every engine
// its URL and what /health said last.
func (t *attachedTarget) State() event.EngineInfo {
	t.mu.Lock()
	in := event.EngineInfo{
		Name: t.name, Role: t.role, Index: t.index, HTTPPort: t.httpPort, P2PPort: t.p2pPort,
		Restarts: t.restarts, URL: t.url, Health: t.health,
		Members: append([]int(nil), t.members...),
	}
	proc, busy := t.proc, t.busy
	t.mu.Unlock()
	stopped := false
	if proc != nil {
		if st, err := session.Stat(proc.Pid); err == nil && st.Live() && st.StartTicks == proc.StartTicks {
			in.Pid, in.Sid = st.Pid, st.Sid
			in.Uptime = uptime(st.StartTicks)
			stopped = st.Stopped()
		}
	}
	switch {
	case busy != "":
		in.State = event.StateRestarting
	case t.t != nil && t.t.Removed():
		in.State = event.StateRemoved
	case stopped || (t.t != nil && t.t.Stalled()):
		in.State = event.StateStopped
	case in.Health == "ok":
		in.State = event.StateReady
	default:
		in.State = event.StateUnreachable
	}
	return in
}

// Host is what the host shows of a local engine (its session, members
// and listeners), so its faults are verified as a launched engine's are;
// an engine faulted by commands (kubectl, ssh) is not on this host.
func (t *attachedTarget) Host() (fault.Host, bool) {
	if !t.local {
		return fault.Host{}, false
	}
	t.refreshProc()
	in := t.State()
	if in.Sid <= 0 {
		return fault.Host{}, false
	}
	return fault.Host{
		Sid:  in.Sid,
		Pids: in.Members,
		Addrs: []string{
			net.JoinHostPort(t.host, strconv.Itoa(t.httpPort)),
			net.JoinHostPort(t.p2pHost, strconv.Itoa(t.p2pPort)),
		},
		Ready: t.t.Health,
	}, true
}

// LogTail is empty: p2pfault does not see the output of engines it did
// not start (an engine it restarts logs to OUT/attached-NAME.log).
func (t *attachedTarget) LogTail(int) []string { return nil }

// The fault.Target side: every action goes through attach.Target.Do.

func (t *attachedTarget) src() (*attach.Target, error) {
	if t.t == nil {
		return nil, errors.New("the decoder of an attached cluster is not faulted")
	}
	return t.t, nil
}

func (t *attachedTarget) Stop(ctx context.Context) (time.Time, error) {
	s, err := t.src()
	if err != nil {
		return time.Time{}, err
	}
	r, err := s.Do(ctx, attach.Stall)
	if err != nil {
		return time.Time{}, unprefix(err, s)
	}
	return r.At, nil
}

// Continue resumes the stall. A stall that is no longer held was resumed
// by someone else on the way out (Close, at the run's end): done.
func (t *attachedTarget) Continue(ctx context.Context) error {
	s, err := t.src()
	if err != nil {
		return err
	}
	if _, err := s.Do(ctx, attach.Resume); err != nil {
		if !s.Stalled() {
			return nil
		}
		return unprefix(err, s)
	}
	return nil
}

func (t *attachedTarget) Kill(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	s, err := t.src()
	if err != nil {
		return time.Time{}, err
	}
	t.setBusy("restarting")
	defer t.setBusy("")
	r, err := s.Do(ctx, attach.Kill)
	// Sent: the command ran, or signals reached the session (a local
	// restart may still fail after that).
	if signalled != nil && (err == nil || len(r.Pids) > 0) {
		signalled(r.At, unprefixOrNil(err, s))
	}
	if err != nil {
		return time.Time{}, unprefix(err, s)
	}
	t.forget()
	t.mu.Lock()
	t.restarts++
	t.mu.Unlock()
	rr, err := s.Do(ctx, attach.Ready)
	if err != nil {
		return time.Time{}, unprefix(err, s)
	}
	t.answered()
	return rr.At, nil
}

func (t *attachedTarget) Terminate(ctx context.Context, signalled func(time.Time, error)) error {
	s, err := t.src()
	if err != nil {
		return err
	}
	r, err := s.Do(ctx, attach.Remove)
	if signalled != nil && (err == nil || len(r.Pids) > 0) {
		signalled(r.At, unprefixOrNil(err, s))
	}
	t.forget()
	t.refresh(ctx, 500*time.Millisecond) // a removed engine refuses at once
	return unprefixOrNil(err, s)
}

func (t *attachedTarget) Restore(ctx context.Context) (time.Time, error) {
	s, err := t.src()
	if err != nil {
		return time.Time{}, err
	}
	t.setBusy("restarting")
	defer t.setBusy("")
	if _, err := s.Do(ctx, attach.Restore); err != nil {
		return time.Time{}, unprefix(err, s)
	}
	t.mu.Lock()
	t.restarts++
	t.mu.Unlock()
	r, err := s.Do(ctx, attach.Ready)
	if err != nil {
		return time.Time{}, unprefix(err, s)
	}
	t.answered()
	return r.At, nil
}

func (t *attachedTarget) setBusy(b string) {
	t.mu.Lock()
	t.busy = b
	t.mu.Unlock()
}

// unprefix drops the "NAME: ACTION: " attach puts first: the fault kinds
// name the target and the action themselves.
func unprefix(err error, s *attach.Target) error {
	msg := strings.TrimPrefix(err.Error(), s.Name()+": ")
	for _, a := range attach.Actions {
		if m, ok := strings.CutPrefix(msg, string(a)+": "); ok {
			msg = m
			break
		}
	}
	return fmt.Errorf("%s", msg)
}

func unprefixOrNil(err error, s *attach.Target) error {
	if err == nil {
		return nil
	}
	return unprefix(err, s)
}

// checkAttached refuses, before the run, a timeline step that an attached
// source cannot take: a `commands` source with no command for the action.
func checkAttached(c *attach.Cluster, tl fault.Timeline) error {
	srcs := c.Sources()
	for _, s := range tl {
		if s.Source >= len(srcs) {
			continue // Timeline.Check says so
		}
		a := attach.Action(s.Action)
		known := false
		for _, k := range attach.Actions {
			known = known || k == a
		}
		t := srcs[s.Source]
		if !known {
			continue // another kind acts through fault.Target as it can
		}
		if !t.Supports(a) {
			return fmt.Errorf("attach %s: source-%d (%s): %s: the attach file gives no %s command for this source (timeline step %q)",
				c.File().Path, s.Source, t.Name(), a, a, s.String())
		}
		if a == attach.Remove && c.File().RestoreAtEnd && !t.Supports(attach.Restore) {
			return fmt.Errorf("attach %s: source-%d (%s): restore: restore_at_end is set but the attach file gives no restore command for this source",
				c.File().Path, s.Source, t.Name())
		}
	}
	return nil
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

func isLoopbackHost(h string) bool {
	return h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1"
}

func decoderHealth(ctx context.Context, url string, timeout time.Duration) error {
	return attach.HealthURL(ctx, url, timeout)
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
