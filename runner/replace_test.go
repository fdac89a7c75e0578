package runner_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/internal/enginetest"
	"p2pfault/runner"
)

// TestReplaceStartsANewEngineOnNewPorts: Replace ends the engine and
// starts one in its place on ports no engine of the cluster had, in a new
// session, with its command line built for them; sessions.json records
// the new session as a restart's, and the old ports are free.
func TestReplaceStartsANewEngineOnNewPorts(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 2
	c, rec := startCluster(t, cfg)
	src := c.Sources()[0]
	before := src.Info()
	taken := map[int]bool{}
	for _, e := range c.Engines() {
		taken[e.HTTPPort()], taken[e.P2PPort()] = true, true
	}
	var killedAt time.Time
	readyAt, err := src.Target().Replace(context.Background(), func(at time.Time, err error) {
		if err != nil {
			t.Errorf("signalled with %v", err)
		}
		killedAt = at
	})
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	after := src.Info()
	if killedAt.IsZero() || !readyAt.After(killedAt) {
		t.Errorf("killed at %v, ready at %v: want the kill reported, then ready", killedAt, readyAt)
	}
	if after.Sid == before.Sid || after.State != event.StateReady || after.Restarts != 1 {
		t.Errorf("after replace: %+v (before sid %d), want a new session, ready, 1 restart", after, before.Sid)
	}
	if taken[after.HTTPPort] || taken[after.P2PPort] || after.HTTPPort == after.P2PPort {
		t.Errorf("new ports %d/%d: want two ports no engine had (%v)", after.HTTPPort, after.P2PPort, taken)
	}
	if src.HTTPPort() != after.HTTPPort || src.P2PPort() != after.P2PPort ||
		src.HTTPURL() != "http://127.0.0.1:"+strconv.Itoa(after.HTTPPort) {
		t.Errorf("the engine's accessors say %s / %d, its state %d/%d", src.HTTPURL(), src.P2PPort(), after.HTTPPort, after.P2PPort)
	}
	if err := src.Healthy(context.Background()); err != nil {
		t.Errorf("the new engine's /health: %v", err)
	}
	for _, p := range []int{before.HTTPPort, before.P2PPort} {
		if l, err := net.Listen("tcp", net.JoinHostPort(runner.Host, strconv.Itoa(p))); err != nil {
			t.Errorf("old port %d still taken: %v", p, err)
		} else {
			l.Close()
		}
	}
	if live := liveMembers(t, before.Sid); len(live) > 0 {
		t.Errorf("old session %d still has %v", before.Sid, live)
	}
	// The command line names the new ports: --port and the P2P tier's port.
	argv := procArgv(t, after.Pid)
	if i := slices.Index(argv, "--port"); i < 0 || argv[i+1] != strconv.Itoa(after.HTTPPort) {
		t.Errorf("new argv %q: want --port %d", argv, after.HTTPPort)
	}
	if !slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, `"port":`+strconv.Itoa(after.P2PPort)+`}`) }) {
		t.Errorf("new argv %q: want the P2P tier on port %d", argv, after.P2PPort)
	}
	entries := readSessions(t, cfg.OutDir).Engines
	i := slices.IndexFunc(entries, func(e runner.SessionEntry) bool { return e.Engine == "source-0" })
	if i < 0 || entries[i].Sid != after.Sid || !slices.Contains(entries[i].Argv, strconv.Itoa(after.HTTPPort)) {
		t.Errorf("sessions.json %+v does not name the new session %d on port %d", entries, after.Sid, after.HTTPPort)
	}
	// The faces saw the new ports from the restart on.
	if !enginetest.Eventually(2*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.ContainsFunc(rec.changes, func(c event.EngineInfo) bool {
			return c.Name == "source-0" && c.State == event.StateRestarting && c.HTTPPort == after.HTTPPort
		})
	}) {
		t.Errorf("no restarting state carries the new port %d", after.HTTPPort)
	}
	// Other engines are untouched.
	if other := c.Sources()[1].Info(); other.Restarts != 0 || other.State != event.StateReady {
		t.Errorf("source-1 after source-0's replace: %+v", other)
	}
}

// TestReplaceTwiceNeverReusesAPort: a source may be replaced again (a
// nemesis draws kinds at random): each replace takes fresh ports.
func TestReplaceTwiceNeverReusesAPort(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c, _ := startCluster(t, cfg)
	src := c.Sources()[0]
	seen := map[int]bool{src.HTTPPort(): true, src.P2PPort(): true, c.Decoder().HTTPPort(): true, c.Decoder().P2PPort(): true}
	for i := range 2 {
		if _, err := src.Target().Replace(context.Background(), nil); err != nil {
			t.Fatalf("replace %d: %v", i+1, err)
		}
		for _, p := range []int{src.HTTPPort(), src.P2PPort()} {
			if seen[p] {
				t.Errorf("replace %d: port %d was used before", i+1, p)
			}
			seen[p] = true
		}
		if err := src.Healthy(context.Background()); err != nil {
			t.Errorf("replace %d: /health: %v", i+1, err)
		}
	}
	if got := src.Info().Restarts; got != 2 {
		t.Errorf("restarts %d, want 2", got)
	}
}
