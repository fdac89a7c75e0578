package fault_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/internal/enginetest"
	"p2pfault/runner"
)

func healthy(e *runner.Engine) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(e.HTTPURL() + "/health")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// role is the sim subcommand a process runs: "serve" (front end) or
// "core".
func role(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(string(b), "\x00")
	if len(argv) < 3 || argv[1] != "sim" {
		return strings.Join(argv, " ")
	}
	return argv[2]
}

func refused(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(runner.Host, strconv.Itoa(port)), time.Second)
	if err != nil {
		return true
	}
	_ = c.Close()
	return false
}

// TestFaultsHitExactlyTheTargetSession applies each fault to source-0 and
// checks its effect and that nothing else moved: not source-1, not the
// decoder, not a bystander session the test started.
func TestFaultsHitExactlyTheTargetSession(t *testing.T) {
	tests := []struct {
		name  string
		apply func(t *testing.T, e *runner.Engine, before event.EngineInfo)
	}{
		{"stall stops every member and SIGCONT resumes them", func(t *testing.T, e *runner.Engine, before event.EngineInfo) {
			st, err := fault.Stall(context.Background(), e.Target(), 0)
			if err != nil {
				t.Fatal(err)
			}
			s := snap(t, before.Sid)
			if len(s) != len(before.Members) || len(s) < 2 {
				t.Errorf("stalled session has %v, want all of %v", s, before.Members)
			}
			var roles []string
			for pid, state := range s {
				if state != 'T' {
					t.Errorf("pid %d in state %c after the stall, want T", pid, state)
				}
				roles = append(roles, role(t, pid))
			}
			slices.Sort(roles)
			if !slices.Equal(roles, []string{"core", "serve"}) {
				t.Errorf("stopped processes run %q, want the front end (sim serve) and the core (sim core)", roles)
			}
			if in := e.Info(); in.State != event.StateStopped {
				t.Errorf("Info state %s, want stopped", in.State)
			}
			if err := st.ResumeBy("test"); err != nil {
				t.Fatal(err)
			}
			for pid, state := range snap(t, before.Sid) {
				if state == 'T' {
					t.Errorf("pid %d still stopped after resume", pid)
				}
			}
			if !enginetest.Eventually(5*time.Second, func() bool { return healthy(e) }) || e.Info().State != event.StateReady {
				t.Errorf("resumed engine not serving: %+v", e.Info())
			}
			if st.ResumedAt().Before(st.StoppedAt()) {
				t.Errorf("resumed at %v before stopped at %v", st.ResumedAt(), st.StoppedAt())
			}
		}},
		{"kill restarts on the same ports in a new session and gets ready", func(t *testing.T, e *runner.Engine, before event.EngineInfo) {
			var killedAt time.Time
			readyAt, err := e.Target().Kill(context.Background(), func(at time.Time, err error) { killedAt = at })
			if err != nil {
				t.Fatal(err)
			}
			after := e.Info()
			if after.Sid == before.Sid || after.Sid == 0 {
				t.Errorf("kill: before sid %d, after sid %d: want a new session", before.Sid, after.Sid)
			}
			if after.HTTPPort != before.HTTPPort || after.P2PPort != before.P2PPort {
				t.Errorf("ports moved: %d/%d → %d/%d", before.HTTPPort, before.P2PPort, after.HTTPPort, after.P2PPort)
			}
			if after.State != event.StateReady || !healthy(e) || after.Restarts != 1 {
				t.Errorf("after kill: %+v, want ready with 1 restart", after)
			}
			if !readyAt.After(killedAt) || !readyAt.Equal(e.ReadyAt()) {
				t.Errorf("ready at %v, killed at %v, engine says ready at %v", readyAt, killedAt, e.ReadyAt())
			}
			if s := snap(t, before.Sid); len(s) != 0 {
				t.Errorf("old session %d still has %v", before.Sid, s)
			}
		}},
		{"remove leaves it down", func(t *testing.T, e *runner.Engine, before event.EngineInfo) {
			if err := e.Target().Terminate(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if s := snap(t, before.Sid); len(s) != 0 {
				t.Errorf("removed session %d still has %v", before.Sid, s)
			}
			time.Sleep(200 * time.Millisecond) // nothing brings it back by itself
			if in := e.Info(); in.State != event.StateRemoved || in.Pid != 0 {
				t.Errorf("after remove: %+v", in)
			}
			if !refused(before.HTTPPort) || !refused(before.P2PPort) {
				t.Errorf("ports %d/%d of a removed engine still answer", before.HTTPPort, before.P2PPort)
			}
		}},
	}
	for _, kind := range engineKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				testFault(t, kind.config(t), tt.apply)
			})
		}
	}
}

// testFault applies a fault to source-0 of a fresh cluster and checks that
// no other session moved.
func testFault(t *testing.T, cfg runner.Config, apply func(t *testing.T, e *runner.Engine, before event.EngineInfo)) {
	c := startCluster(t, cfg)
	bystander := enginetest.StartSession(t)
	target := c.Sources()[0]
	before := target.Info()
	others := map[string]event.EngineInfo{}
	snaps := map[int]snapshot{bystander: snap(t, bystander)}
	for _, e := range c.Engines()[1:] {
		in := e.Info()
		others[e.Name()] = in
		snaps[in.Sid] = snap(t, in.Sid)
	}

	apply(t, target, before)

	for sid, s := range snaps {
		if why := untouched(t, sid, s); why != "" {
			t.Errorf("session %d (not the target) was touched: %s", sid, why)
		}
	}
	for _, e := range c.Engines()[1:] {
		if in := e.Info(); in.Sid != others[e.Name()].Sid || in.State != event.StateReady || in.Restarts != 0 {
			t.Errorf("%s changed: %+v", e.Name(), in)
		}
	}
}

func TestStallResumesByItselfAfterItsDuration(t *testing.T) {
	c := startCluster(t, fakeConfig(t))
	e := c.Sources()[1]
	const d = 300 * time.Millisecond
	st, err := fault.Stall(context.Background(), e.Target(), d)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("stall never resumed")
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	// The mechanism on real processes: stopped, then every one running
	// again, never before d. How long after d is the fault package's
	// timer, judged exactly on the fake clock (TestStallLastsExactlyItsDuration):
	// here a busy machine could add any delay.
	if got := st.ResumedAt().Sub(st.StoppedAt()); got < d {
		t.Errorf("stall lasted %v, less than its %v", got, d)
	}
	for pid, state := range snap(t, e.Info().Sid) {
		if state == 'T' {
			t.Errorf("pid %d still stopped", pid)
		}
	}
}

func TestStallEndsWithItsContext(t *testing.T) {
	c := startCluster(t, fakeConfig(t))
	e := c.Sources()[0]
	ctx, cancel := context.WithCancel(context.Background())
	st, err := fault.Stall(ctx, e.Target(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-st.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("stall outlived its context")
	}
	if in := e.Info(); in.State != event.StateReady {
		t.Errorf("after the context ended: %s, want ready", in.State)
	}
}

func TestFaultsRefuseEnginesThatAreNotRunning(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c := startCluster(t, cfg)
	e := c.Sources()[0]
	if err := e.Target().Terminate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{fault.ActionStall, fault.ActionKill, fault.ActionRemove} {
		t.Run(kind, func(t *testing.T) {
			env := newRecEnv(t)
			err := fire(env, kind, e.Target(), 0)
			want := kind + " source-0: it is not running (removed)"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
			if got := env.actions(); got != kind+":"+"!" {
				t.Errorf("events %q, want the failed %s only", got, kind)
			}
		})
	}
	env := newRecEnv(t)
	if err := fire(env, fault.ActionRestore, e.Target(), 0); err != nil {
		t.Fatalf("restore: %v", err)
	}
	env.wait(t, fault.ActionReady, 30*time.Second)
	if !healthy(e) {
		t.Error("restored engine not healthy")
	}
}

// recEnv is a fault.Env that records what a kind did.
type recEnv struct {
	t   testing.TB
	ctx context.Context

	mu      sync.Mutex
	evs     []string
	at      map[string]time.Time
	windows []string
	winAt   []time.Time
	cond    event.Condition
	held    any
	failed  error
	effects []string
	changed []string // the events recorded before each Changed, as actions() gives them
	wg      sync.WaitGroup
}

func newRecEnv(t testing.TB) *recEnv {
	ctx, cancel := context.WithCancel(context.Background())
	e := &recEnv{t: t, ctx: ctx, at: map[string]time.Time{}}
	t.Cleanup(func() { cancel(); e.wg.Wait() })
	return e
}

func (e *recEnv) Context() context.Context { return e.ctx }
func (e *recEnv) Record(action string, d time.Duration, by string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := action + ":"
	if err != nil {
		s += "!"
	}
	e.evs = append(e.evs, s)
	if err == nil {
		e.at[action] = time.Now()
	}
}
func (e *recEnv) OpenWindow(at time.Time, recovers bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.windows = append(e.windows, "open")
	e.winAt = append(e.winAt, at)
}
func (e *recEnv) CloseWindow(at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.windows = append(e.windows, "close")
	e.winAt = append(e.winAt, at)
}
func (e *recEnv) SetCondition(c event.Condition) { e.mu.Lock(); e.cond = c; e.mu.Unlock() }
func (e *recEnv) Hold(h any)                     { e.mu.Lock(); e.held = h; e.mu.Unlock() }
func (e *recEnv) Verified(action string, ef fault.Effect) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.effects = append(e.effects, action+":"+ef.Detail)
}

func (e *recEnv) Held() any      { e.mu.Lock(); defer e.mu.Unlock(); return e.held }
func (e *recEnv) Go(fn func())   { e.wg.Go(fn) }
func (e *recEnv) Fail(err error) { e.mu.Lock(); e.failed = err; e.mu.Unlock() }
func (e *recEnv) Changed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed = append(e.changed, strings.Join(e.evs, " "))
}

func (e *recEnv) actions() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.evs, " ")
}

func (e *recEnv) wait(t testing.TB, action string, limit time.Duration) time.Time {
	t.Helper()
	var at time.Time
	if !enginetest.Eventually(limit, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		at = e.at[action]
		return !at.IsZero()
	}) {
		t.Fatalf("no %s within %v: events %q", action, limit, e.actions())
	}
	return at
}

// fire takes a registered kind on target, as the experiment does.
func fire(env *recEnv, kind string, target fault.Target, d time.Duration) error {
	k, ok := fault.Lookup(kind)
	if !ok {
		return fmt.Errorf("no kind %q", kind)
	}
	return k.Act(&fault.Fire{Kind: k, Target: target, Options: fault.Options{For: d}, By: "script", Env: env})
}

// TestKindsPlayATimelineOnARealCluster plays a timeline through the
// registered kinds and checks the events that open and close each fault
// window, and that every source ends up running.
func TestKindsPlayATimelineOnARealCluster(t *testing.T) {
	c := startCluster(t, fakeConfig(t))
	envs := []*recEnv{newRecEnv(t), newRecEnv(t)}
	tl, err := fault.Parse("at 0s stall source-0 for 300ms; at 0s kill source-1; at 600ms remove source-0; at 900ms restore source-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Check(len(c.Sources()), nil); err != nil {
		t.Fatal(err)
	}
	err = tl.Play(context.Background(), time.Now(), func(_ context.Context, s fault.Step) error {
		return fire(envs[s.Source], s.Kind.Name, c.Sources()[s.Source].Target(), s.For)
	})
	if err != nil {
		t.Fatal(err)
	}
	envs[0].wait(t, fault.ActionReady, 30*time.Second)
	envs[1].wait(t, fault.ActionReady, 30*time.Second)
	if got, want := envs[0].actions(), "stall: resume: remove: restore: ready:"; got != want {
		t.Errorf("source-0 events %q, want %q", got, want)
	}
	if got, want := envs[1].actions(), "kill: ready:"; got != want {
		t.Errorf("source-1 events %q, want %q", got, want)
	}
	if got, want := strings.Join(envs[0].windows, " "), "open close open open close"; got != want {
		t.Errorf("source-0 windows %q, want %q (stall, remove, then the restore's own)", got, want)
	}
	// Never shorter than the stall; the steps' times are judged exactly
	// on the fake clock (TestPlayFiresStepsInOrderOnTimeAndStopsAtAFailure,
	// TestStallLastsExactlyItsDuration).
	if d := envs[0].winAt[1].Sub(envs[0].winAt[0]); d < 300*time.Millisecond {
		t.Errorf("stall window %v, shorter than the stall's 300ms", d)
	}
	for i, e := range c.Sources() {
		if in := e.Info(); in.State != event.StateReady {
			t.Errorf("%s ended %s, want ready", e.Name(), in.State)
		}
		if envs[i].failed != nil || envs[i].cond != event.CondUp {
			t.Errorf("%s: failed %v, condition %q", e.Name(), envs[i].failed, envs[i].cond)
		}
	}
}

// BenchmarkStallResume: SIGSTOP every process of a source's session,
// confirm through /proc that all are stopped, SIGCONT, confirm all run.
func BenchmarkStallResume(b *testing.B) {
	for _, kind := range engineKinds {
		b.Run(kind.name, func(b *testing.B) {
			cfg := kind.config(b)
			cfg.Sources = 1
			c := startCluster(b, cfg)
			e := c.Sources()[0]
			members := len(e.Info().Members)
			ctx := context.Background()
			for b.Loop() {
				st, err := fault.Stall(ctx, e.Target(), 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.ResumeBy("test"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(members), "procs/op")
		})
	}
}
