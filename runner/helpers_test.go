package runner_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/internal/enginetest"
	"p2pfault/runner"
	"p2pfault/runner/session"
	"p2pfault/sim"
)

// recorder collects what a cluster reports through its callbacks.
type recorder struct {
	mu      sync.Mutex
	lines   map[string][]string
	changes []event.EngineInfo
	sids    map[int]bool
}

func newRecorder() *recorder {
	return &recorder{lines: map[string][]string{}, sids: map[int]bool{}}
}

func (r *recorder) onLog(engine, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines[engine] = append(r.lines[engine], line)
}

func (r *recorder) onChange(c event.EngineInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
	if c.Sid > 0 {
		r.sids[c.Sid] = true
	}
}

// states returns the states engine went through, in order.
func (r *recorder) states(engine string) []event.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event.State
	for _, c := range r.changes {
		if c.Name == engine {
			out = append(out, c.State)
		}
	}
	return out
}

func (r *recorder) hasLine(engine, sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.lines[engine], func(l string) bool { return strings.Contains(l, sub) })
}

func (r *recorder) allSids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for sid := range r.sids {
		out = append(out, sid)
	}
	return out
}

// testEnv makes engines fake ones, and stops the race detector's runtime
// from sleeping 1 s at every exit of a -race test binary (GORACE's
// atexit_sleep_ms), which would slow every stop and restart.
func testEnv() []string {
	return []string{enginetest.EnvVar + "=1", "GORACE=atexit_sleep_ms=0"}
}

// simConfig is a cluster of real simulated engines (this test binary as
// p2pfault) on kernel-picked ports, their startup delay scaled down.
func simConfig(t *testing.T) runner.Config {
	t.Helper()
	return simConfigIn(t.TempDir())
}

func simConfigIn(dir string) runner.Config {
	return runner.Config{
		OutDir:       dir,
		FreePorts:    true,
		TimeScale:    0.05,
		Env:          []string{sim.StandaloneEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		ReadyTimeout: 60 * time.Second,
		StopGrace:    5 * time.Second,
	}
}

// fakeConfig is a cluster of fake engines on kernel-picked ports.
func fakeConfig(t *testing.T) runner.Config {
	t.Helper()
	return runner.Config{
		OutDir:       t.TempDir(),
		FreePorts:    true,
		Env:          testEnv(),
		ReadyTimeout: 30 * time.Second,
		StopGrace:    3 * time.Second,
	}
}

// startCluster starts cfg with a recorder; the cluster is stopped in
// t.Cleanup, and every session it ever had is SIGKILLed after that in case
// Stop failed.
func startCluster(t *testing.T, cfg runner.Config) (*runner.Cluster, *recorder) {
	t.Helper()
	rec := newRecorder()
	also := cfg.OnChange // the test's own, after the recorder
	cfg.OnLog = rec.onLog
	cfg.OnChange = func(c event.EngineInfo) {
		rec.onChange(c)
		if also != nil {
			also(c)
		}
	}
	t.Cleanup(func() { killSessions(rec.allSids()) })
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
	return c, rec
}

func killSessions(sids []int) {
	for _, sid := range sids {
		_, _ = session.Signal(sid, unix.SIGKILL)
	}
}

// liveMembers returns the live processes of session sid.
func liveMembers(t *testing.T, sid int) []int {
	t.Helper()
	live, err := session.Live(sid)
	if err != nil {
		t.Fatalf("read session %d: %v", sid, err)
	}
	return live
}
