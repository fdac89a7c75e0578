package fault_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/runner/session"
	"p2pfault/verify"
)

// procTable is a faked /proc: each session's processes, settable.
type procTable struct {
	mu    sync.Mutex
	procs map[int]session.Proc
}

func (p *procTable) set(ps ...session.Proc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.procs = map[int]session.Proc{}
	for _, q := range ps {
		p.procs[q.Pid] = q
	}
}

func (p *procTable) Session(sid int) ([]session.Proc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []session.Proc
	for _, q := range p.procs {
		if q.Sid == sid {
			out = append(out, q)
		}
	}
	return out, nil
}

func (p *procTable) Proc(pid int) (session.Proc, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.procs[pid]
	return q, ok, nil
}

// hostTarget is a fault.Target whose signals change the faked /proc the
// way real ones would, unless deaf (its members ignore SIGSTOP).
type hostTarget struct {
	procs  *procTable
	sid    int
	deaf   bool
	addrs  []string
	health string
}

func (h *hostTarget) members(state byte) {
	h.procs.set(session.Proc{Pid: h.sid, Sid: h.sid, State: state}, session.Proc{Pid: h.sid + 1, Sid: h.sid, State: state})
}

func (h *hostTarget) Name() string { return "source-0" }
func (h *hostTarget) Stop(context.Context) (time.Time, error) {
	if !h.deaf {
		h.members('T')
	}
	return time.Now(), nil
}
func (h *hostTarget) Continue(context.Context) error { h.members('S'); return nil }
func (h *hostTarget) Kill(_ context.Context, signalled func(time.Time, error)) (time.Time, error) {
	signalled(time.Now(), nil)
	h.sid += 100 // a new session; the old pids are gone
	h.members('S')
	return time.Now(), nil
}
func (h *hostTarget) Terminate(_ context.Context, signalled func(time.Time, error)) error {
	signalled(time.Now(), nil)
	h.procs.set()
	return nil
}
func (h *hostTarget) Restore(context.Context) (time.Time, error) { return time.Now(), nil }
func (h *hostTarget) Host() (fault.Host, bool) {
	var pids []int
	ms, _ := h.procs.Session(h.sid)
	for _, m := range ms {
		pids = append(pids, m.Pid)
	}
	return fault.Host{Sid: h.sid, Pids: pids, Addrs: h.addrs, Ready: h.ready}, true
}

// ready asks the test's health server, as an engine's /health is asked.
func (h *hostTarget) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.health, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// fakeVerifier reads the faked /proc of target (a *hostTarget), quickly.
func fakeVerifier(target fault.Target) verify.Verifier {
	h, _ := target.(*hostTarget)
	if h == nil {
		return verify.Verifier{}
	}
	return verify.Verifier{Procs: h.procs, Deadline: 300 * time.Millisecond, Poll: 5 * time.Millisecond}
}

// closedAddr is a loopback address nothing listens on any more.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

func newHostTarget(t *testing.T) *hostTarget {
	procs := &procTable{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	h := &hostTarget{procs: procs, sid: 4242, addrs: []string{closedAddr(t), closedAddr(t)}, health: srv.URL + "/health"}
	h.members('S')
	return h
}

// verified fires kind on target and gives its verification as the run
// records it, and check fault_took_effect over it.
func verified(t *testing.T, env *recEnv, kind string, target fault.Target) (fault.Effect, event.Result) {
	t.Helper()
	k, ok := fault.Lookup(kind)
	if !ok || k.Verify == nil {
		t.Fatalf("kind %s has no Verify", kind)
	}
	f := &fault.Fire{Kind: k, Target: target, By: "script", Env: env, Verifier: fakeVerifier(target)}
	at := time.Now()
	if err := k.Act(f); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	ef := k.Verify(f)
	v := event.Verification{Action: kind, Source: 0, At: time.Since(at), Verified: ef.OK, After: ef.After, Detail: ef.Detail}
	return ef, check.FaultTookEffect([]event.Verification{v}, 0)
}

func TestFaultTookEffectPassesForEachKind(t *testing.T) {
	for _, kind := range []string{fault.ActionStall, fault.ActionResume, fault.ActionKill, fault.ActionRemove} {
		t.Run(kind, func(t *testing.T) {
			h := newHostTarget(t)
			env := newRecEnv(t)
			if kind == fault.ActionResume {
				// resume undoes a stall in force.
				st, err := fault.Stall(env.Context(), h, 0)
				if err != nil {
					t.Fatal(err)
				}
				env.Hold(st)
			}
			ef, r := verified(t, env, kind, h)
			if !ef.OK || !r.Passed {
				t.Fatalf("%s: effect %+v, check %+v; want it seen and %s passed", kind, ef, r, check.NameFaultTookEffect)
			}
			t.Logf("%s: %s after %s", kind, ef.Detail, ef.After)
		})
	}
}

// A stall sent to a session whose members ignore it (the faked /proc
// never shows them stopped) does not take effect, and the check says so.
func TestFaultTookEffectFailsWhenTheStallDidNothing(t *testing.T) {
	h := newHostTarget(t)
	h.deaf = true
	ef, r := verified(t, newRecEnv(t), fault.ActionStall, h)
	if ef.OK || r.Passed || r.Empty {
		t.Fatalf("effect %+v, check %+v; want not seen and %s failed", ef, r, check.NameFaultTookEffect)
	}
	want := "0 of 2 processes of session 4242 in state T"
	if !strings.Contains(r.Detail, want) {
		t.Errorf("detail %q lacks %q", r.Detail, want)
	}
}

// A remove whose ports still accept connections did not take effect.
func TestFaultTookEffectFailsWhenARemovedPortStillAccepts(t *testing.T) {
	h := newHostTarget(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h.addrs = []string{l.Addr().String()}
	ef, r := verified(t, newRecEnv(t), fault.ActionRemove, h)
	if ef.OK || r.Passed {
		t.Fatalf("effect %+v, check %+v; want %s failed", ef, r, check.NameFaultTookEffect)
	}
}

// A target p2pfault cannot read on the host is not verified at all.
func TestVerifySkipsATargetNotOnThisHost(t *testing.T) {
	h := newHostTarget(t)
	k, _ := fault.Lookup(fault.ActionStall)
	f := &fault.Fire{Kind: k, Target: plainTarget{h}, Env: newRecEnv(t), Verifier: fakeVerifier(h)}
	if err := k.Act(f); err != nil {
		t.Fatal(err)
	}
	if ef := k.Verify(f); !ef.Skipped {
		t.Errorf("Verify on a target without Host = %+v, want Skipped", ef)
	}
}

// plainTarget hides hostTarget's Host method.
type plainTarget struct{ h *hostTarget }

func (p plainTarget) Name() string                                { return p.h.Name() }
func (p plainTarget) Stop(ctx context.Context) (time.Time, error) { return p.h.Stop(ctx) }
func (p plainTarget) Continue(ctx context.Context) error          { return p.h.Continue(ctx) }
func (p plainTarget) Kill(ctx context.Context, s func(time.Time, error)) (time.Time, error) {
	return p.h.Kill(ctx, s)
}
func (p plainTarget) Terminate(ctx context.Context, s func(time.Time, error)) error {
	return p.h.Terminate(ctx, s)
}
func (p plainTarget) Restore(ctx context.Context) (time.Time, error) { return p.h.Restore(ctx) }

// partReporter is one rank's core of a Reporter's engine (the virtual
// cluster's rankTarget): Stop freezes the processes stops names.
type partReporter struct {
	plainTarget
	mu     sync.Mutex
	frozen map[string]bool
	stops  []string
}

func (p *partReporter) Stop(context.Context) (time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.stops {
		p.frozen[n] = true
	}
	return time.Now(), nil
}

func (p *partReporter) Report() fault.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := fault.Report{Running: true, Instance: 1, Part: "rank 1's core", Frozen: p.frozen["rank 1's core"]}
	for _, n := range []string{"front end", "rank 0's core", "rank 1's core"} {
		r.Procs = append(r.Procs, fault.Proc{Name: n, Frozen: p.frozen[n]})
	}
	return r
}

// A stall of one rank's core on a Reporter is verified as StallPart reads
// /proc: that core stopped and every other process running, named; a
// sibling stopped with it, or the core left running, fails it.
func TestStallOfAReportersPartNamesItsProcesses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stops  []string
		ok     bool
		detail string
	}{
		{"only the rank's core", []string{"rank 1's core"}, true, "stopped rank 1's core; running front end, rank 0's core"},
		{"a sibling too", []string{"rank 0's core", "rank 1's core"}, false, "stopped rank 0's core, rank 1's core; running front end (want rank 1's core alone stopped)"},
		{"nothing", nil, false, "stopped none; running front end, rank 0's core, rank 1's core (want rank 1's core alone stopped)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &partReporter{plainTarget: plainTarget{newHostTarget(t)}, frozen: map[string]bool{}, stops: tt.stops}
			env := newRecEnv(t)
			k, _ := fault.Lookup(fault.ActionStall)
			f := &fault.Fire{Kind: k, Target: p, By: "script", Env: env, Verifier: verify.Verifier{Deadline: 50 * time.Millisecond, Poll: 5 * time.Millisecond}}
			if err := k.Act(f); err != nil {
				t.Fatal(err)
			}
			ef := k.Verify(f)
			if ef.OK != tt.ok || !strings.HasSuffix(ef.Detail, "source-0 (instance 1): "+tt.detail) {
				t.Errorf("effect %+v, want OK %v, detail ending %q", ef, tt.ok, tt.detail)
			}
		})
	}
}
