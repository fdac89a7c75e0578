package fault_test

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/internal/enginetest"
	"p2pfault/runner"
	"p2pfault/runner/session"
	"p2pfault/sim"
)

func TestMain(m *testing.M) {
	if os.Getenv(sim.StandaloneEnv) == "1" {
		os.Exit(sim.RunStandalone(os.Args[1:]))
	}
	if os.Getenv(enginetest.EnvVar) == "1" {
		os.Exit(enginetest.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeConfig is a cluster of fake engines (internal/enginetest: the sim's
// process shape, ready in milliseconds) on kernel-picked ports. GORACE
// stops a -race engine from sleeping 1 s at exit.
func fakeConfig(t testing.TB) runner.Config {
	return runner.Config{
		OutDir:       t.TempDir(),
		FreePorts:    true,
		Env:          []string{enginetest.EnvVar + "=1", "GORACE=atexit_sleep_ms=0"},
		ReadyTimeout: 30 * time.Second,
		StopGrace:    3 * time.Second,
	}
}

// simConfig is a cluster of real simulated engines (this test binary as
// p2pfault), their startup delay scaled down.
func simConfig(t testing.TB) runner.Config {
	return runner.Config{
		OutDir:       t.TempDir(),
		FreePorts:    true,
		TimeScale:    0.05,
		Env:          []string{sim.StandaloneEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		ReadyTimeout: 60 * time.Second,
		StopGrace:    5 * time.Second,
	}
}

// engineKinds are the engines the fault tests run against: the real
// simulated engine, and the fake with the same process shape.
var engineKinds = []struct {
	name   string
	config func(testing.TB) runner.Config
}{
	{"sim", simConfig},
	{"fake", fakeConfig},
}

// startCluster starts cfg, stops it in t.Cleanup and then SIGKILLs every
// session it ever had, in case Stop failed.
func startCluster(t testing.TB, cfg runner.Config) *runner.Cluster {
	t.Helper()
	var sids []int
	cfg.OnChange = func(c event.EngineInfo) {
		if c.Sid > 0 {
			sids = append(sids, c.Sid) // OnChange runs on one goroutine
		}
	}
	t.Cleanup(func() {
		for _, sid := range sids {
			_, _ = session.Signal(sid, unix.SIGKILL)
		}
	})
	c, err := runner.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	return c
}

// snapshot is a session's members and their states.
type snapshot map[int]byte

func snap(t testing.TB, sid int) snapshot {
	t.Helper()
	ms, err := session.Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{}
	for _, m := range ms {
		if m.Live() {
			s[m.Pid] = m.State
		}
	}
	return s
}

// untouched reports how a session changed from before, "" if it did not:
// the same live pids, none stopped.
func untouched(t testing.TB, sid int, before snapshot) string {
	now := snap(t, sid)
	if len(now) != len(before) {
		return "members changed"
	}
	for pid, st := range now {
		if _, ok := before[pid]; !ok {
			return "members changed"
		}
		if st == 'T' {
			return "a member is stopped"
		}
	}
	return ""
}
