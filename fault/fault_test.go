package fault_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/runner/enginetest"
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
		apply func(t *testing.T, e *runner.Engine, before runner.Info)
	}{
		{"stall stops every member and SIGCONT resumes them", func(t *testing.T, e *runner.Engine, before runner.Info) {
			st, err := fault.Stall(context.Background(), e, 0)
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
			if in := e.Info(); in.State != runner.StateStopped {
				t.Errorf("Info state %s, want stopped", in.State)
			}
			if err := st.Resume(); err != nil {
				t.Fatal(err)
			}
			for pid, state := range snap(t, before.Sid) {
				if state == 'T' {
					t.Errorf("pid %d still stopped after resume", pid)
				}
			}
			if !enginetest.Eventually(5*time.Second, func() bool { return healthy(e) }) || e.Info().State != runner.StateReady {
				t.Errorf("resumed engine not serving: %+v", e.Info())
			}
			if st.ResumedAt().Before(st.StoppedAt()) {
				t.Errorf("resumed at %v before stopped at %v", st.ResumedAt(), st.StoppedAt())
			}
		}},
		{"kill restarts on the same ports in a new session and gets ready", func(t *testing.T, e *runner.Engine, before runner.Info) {
			k, err := fault.Kill(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			after := e.Info()
			if k.OldSid != before.Sid || k.NewSid == before.Sid || after.Sid != k.NewSid {
				t.Errorf("kill: %+v, before sid %d, after sid %d: want a new session", k, before.Sid, after.Sid)
			}
			if after.HTTPPort != before.HTTPPort || after.P2PPort != before.P2PPort {
				t.Errorf("ports moved: %d/%d → %d/%d", before.HTTPPort, before.P2PPort, after.HTTPPort, after.P2PPort)
			}
			if after.State != runner.StateReady || !healthy(e) || after.Restarts != 1 {
				t.Errorf("after kill: %+v, want ready with 1 restart", after)
			}
			if !k.ReadyAt.After(k.KilledAt) {
				t.Errorf("ready at %v, killed at %v", k.ReadyAt, k.KilledAt)
			}
			if s := snap(t, before.Sid); len(s) != 0 {
				t.Errorf("old session %d still has %v", before.Sid, s)
			}
		}},
		{"remove leaves it down", func(t *testing.T, e *runner.Engine, before runner.Info) {
			if _, err := fault.Remove(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			if s := snap(t, before.Sid); len(s) != 0 {
				t.Errorf("removed session %d still has %v", before.Sid, s)
			}
			time.Sleep(200 * time.Millisecond) // nothing brings it back by itself
			if in := e.Info(); in.State != runner.StateRemoved || in.Pid != 0 {
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
func testFault(t *testing.T, cfg runner.Config, apply func(t *testing.T, e *runner.Engine, before runner.Info)) {
	c := startCluster(t, cfg)
	bystander := enginetest.StartSession(t)
	target := c.Sources()[0]
	before := target.Info()
	others := map[string]runner.Info{}
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
		if in := e.Info(); in.Sid != others[e.Name()].Sid || in.State != runner.StateReady || in.Restarts != 0 {
			t.Errorf("%s changed: %+v", e.Name(), in)
		}
	}
}

func TestStallResumesByItselfAfterItsDuration(t *testing.T) {
	c := startCluster(t, fakeConfig(t))
	e := c.Sources()[1]
	const d = 300 * time.Millisecond
	st, err := fault.Stall(context.Background(), e, d)
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
	got := st.ResumedAt().Sub(st.StoppedAt())
	if got < d || got > d+time.Second {
		t.Errorf("stall lasted %v, want within [%v, %v]", got, d, d+time.Second)
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
	st, err := fault.Stall(ctx, e, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-st.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("stall outlived its context")
	}
	if in := e.Info(); in.State != runner.StateReady {
		t.Errorf("after the context ended: %s, want ready", in.State)
	}
}

func TestFaultsRefuseEnginesThatAreNotRunning(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c := startCluster(t, cfg)
	e := c.Sources()[0]
	if _, err := fault.Remove(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		want string
	}{
		{"stall", func() error { _, err := fault.Stall(context.Background(), e, 0); return err }, "stall source-0: it is not running (removed)"},
		{"kill", func() error { _, err := fault.Kill(context.Background(), e); return err }, "kill source-0: it is not running (removed)"},
		{"remove", func() error { _, err := fault.Remove(context.Background(), e); return err }, "remove source-0: it is not running (removed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := fault.Restore(context.Background(), e); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !healthy(e) {
		t.Error("restored engine not healthy")
	}
}

func TestSignalSessionRefusesSystemAndOwnSessions(t *testing.T) {
	own, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sid := range []int{0, 1, own} {
		t.Run(strconv.Itoa(sid), func(t *testing.T) {
			if _, err := fault.SignalSession(sid, unix.SIGCONT); err == nil || !strings.Contains(err.Error(), "refusing") {
				t.Errorf("SignalSession(%d) = %v, want a refusal", sid, err)
			}
		})
	}
}

// events collects an injector's events.
type events struct {
	mu  sync.Mutex
	evs []fault.Event
}

func (e *events) add(ev fault.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) actions() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var a []string
	for _, ev := range e.evs {
		s := ev.Action + ":" + strconv.Itoa(ev.Source)
		if ev.Err != nil {
			s += "!"
		}
		a = append(a, s)
	}
	return strings.Join(a, " ")
}

func (e *events) at(action string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.evs {
		if ev.Action == action {
			return ev.At
		}
	}
	return time.Time{}
}

// TestInjectorReportsWhenEachFaultWindowEnds plays a timeline through an
// injector and checks the events that open and close each fault window.
func TestInjectorReportsWhenEachFaultWindowEnds(t *testing.T) {
	c := startCluster(t, fakeConfig(t))
	var evs events
	ctx := context.Background()
	in := fault.NewInjector(ctx, c.Sources(), evs.add)
	tl, err := fault.Parse("at 0s stall source-0 for 300ms; at 0s kill source-1; at 600ms remove source-0; at 900ms restore source-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Check(len(c.Sources())); err != nil {
		t.Fatal(err)
	}
	if err := tl.Play(ctx, time.Now(), in.Do); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	got := evs.actions()
	for _, want := range []string{"stall:0", "resume:0", "kill:1", "ready:1", "remove:0", "restore:0", "ready:0"} {
		if !strings.Contains(got, want) || strings.Contains(got, "!") {
			t.Errorf("events %q: want %s and no failure", got, want)
		}
	}
	if d := evs.at("resume").Sub(evs.at("stall")); d < 300*time.Millisecond || d > 1300*time.Millisecond {
		t.Errorf("stall window %v, want within [300ms, 1.3s]", d)
	}
	if !evs.at("ready").After(evs.at("kill")) {
		t.Errorf("ready %v not after kill %v", evs.at("ready"), evs.at("kill"))
	}
	for _, e := range c.Sources() {
		if in := e.Info(); in.State != runner.StateReady {
			t.Errorf("%s ended %s, want ready", e.Name(), in.State)
		}
	}
	if err := in.Resume(0); err == nil || !strings.Contains(err.Error(), "not stalled") {
		t.Errorf("resume of a running source: %v", err)
	}
	if err := in.Stall(7, 0); err == nil || !strings.Contains(err.Error(), "source 7: the cluster has sources 0-1") {
		t.Errorf("stall of source 7: %v", err)
	}
}

func TestInjectorCloseResumesOpenStalls(t *testing.T) {
	c := startCluster(t, fakeConfig(t))
	var evs events
	in := fault.NewInjector(context.Background(), c.Sources(), evs.add)
	if err := in.Stall(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := in.Stall(0, 0); err == nil || !strings.Contains(err.Error(), "already stalled") {
		t.Errorf("second stall: %v", err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if got := evs.actions(); !strings.HasPrefix(got, "stall:0 stall:0! resume:0") {
		t.Errorf("events %q", got)
	}
	if st := c.Sources()[0].Info().State; st != runner.StateReady {
		t.Errorf("after Close: %s", st)
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
				st, err := fault.Stall(ctx, e, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Resume(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(members), "procs/op")
		})
	}
}
