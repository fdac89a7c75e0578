package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/internal/enginetest"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

type sessionsRecord struct {
	Owner   runner.ProcID         `json:"owner"`
	Engines []runner.SessionEntry `json:"engines"`
}

func readSessions(t *testing.T, dir string) sessionsRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, runner.SessionsFile))
	if err != nil {
		t.Fatal(err)
	}
	var r sessionsRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("parse %s: %v", runner.SessionsFile, err)
	}
	return r
}

func TestStartRunsEachEngineInItsOwnSession(t *testing.T) {
	cfg := fakeConfig(t)
	c, rec := startCluster(t, cfg)

	if n := len(c.Sources()); n != runner.DefaultSources {
		t.Fatalf("%d sources, want %d", n, runner.DefaultSources)
	}
	if c.Decoder().Name() != "decoder" || c.Sources()[1].Name() != "source-1" {
		t.Errorf("names: %s, %s", c.Sources()[1].Name(), c.Decoder().Name())
	}
	sids := map[int]string{}
	own, _ := unix.Getsid(0)
	for _, e := range c.Engines() {
		in := e.Info()
		if in.State != event.StateReady {
			t.Errorf("%s: state %s, want ready", e.Name(), in.State)
		}
		if in.Sid != in.Pid || in.Sid == own {
			t.Errorf("%s: pid %d sid %d (own session %d): want a session of its own", e.Name(), in.Pid, in.Sid, own)
		}
		if prev, dup := sids[in.Sid]; dup {
			t.Errorf("%s shares session %d with %s", e.Name(), in.Sid, prev)
		}
		sids[in.Sid] = e.Name()
		if len(in.Members) != 2 {
			t.Errorf("%s: session members %v, want front end + core", e.Name(), in.Members)
		}
		if !rec.hasLine(e.Name(), "engine ready") || !slices.ContainsFunc(e.LogTail(10), func(l string) bool { return strings.Contains(l, "engine ready") }) {
			t.Errorf("%s: no 'engine ready' in OnLog or LogTail %q", e.Name(), e.LogTail(10))
		}
		if b, err := os.ReadFile(e.LogPath()); err != nil || !strings.Contains(string(b), "engine ready") {
			t.Errorf("%s: log file %s lacks 'engine ready' (%v)", e.Name(), e.LogPath(), err)
		}
		want := []event.State{event.StateStarting, event.StateReady}
		if !enginetest.Eventually(2*time.Second, func() bool { return slices.Equal(rec.states(e.Name()), want) }) {
			t.Errorf("%s: changes %v, want %v", e.Name(), rec.states(e.Name()), want)
		}
		resp, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", net.JoinHostPort(e.P2PHost(), strconv.Itoa(e.P2PPort())))
		if err != nil {
			t.Errorf("%s: P2P port %d not served: %v", e.Name(), e.P2PPort(), err)
		} else {
			_ = resp.Close()
		}
	}
	rec2 := readSessions(t, cfg.OutDir)
	if len(rec2.Engines) != 3 {
		t.Fatalf("sessions.json names %d engines, want 3", len(rec2.Engines))
	}
	for _, en := range rec2.Engines {
		if sids[en.Sid] != en.Engine || en.StartTicks == 0 || len(en.Members) != 2 || len(en.Argv) < 3 {
			t.Errorf("sessions.json entry %+v does not match the running engine", en)
		}
		// Each process's command line as /proc shows it: what cleanup
		// checks before it ends the session.
		for _, m := range en.Members {
			if now, err := session.Cmdline(m.Pid); err != nil || !slices.Equal(en.Cmdlines[m.Pid], now) {
				t.Errorf("%s: recorded command line of pid %d %q, /proc says %q (%v)", en.Engine, m.Pid, en.Cmdlines[m.Pid], now, err)
			}
		}
	}
	// The record's checks (start time, session, command line) hold for
	// the running engines: cleanup would take them for what they are.
	if lo, err := runner.Leftovers(cfg.OutDir); err != nil || len(lo) != 3 {
		t.Errorf("leftovers of the running cluster: %d %v, want its 3 engines recognised", len(lo), err)
	}
	// Written 0600: cleanup trusts a record no one else could write.
	if st, err := os.Stat(filepath.Join(cfg.OutDir, runner.SessionsFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("sessions.json: %v %v, want mode 0600", st.Mode(), err)
	}
}

func TestStopEndsEverySessionAndIsIdempotent(t *testing.T) {
	tests := []struct {
		name       string
		extra      []string
		stall      bool
		grace      time.Duration
		wantExit   string
		wantAtLeas time.Duration
	}{
		{name: "engines that honour SIGTERM exit on it", wantExit: "code 0"},
		{name: "a stalled engine is resumed so it can exit", stall: true, wantExit: "code 0"},
		{name: "engines that ignore SIGTERM are SIGKILLed after the grace", extra: []string{enginetest.FlagIgnoreTerm},
			grace: 300 * time.Millisecond, wantExit: "signal killed", wantAtLeas: 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fakeConfig(t)
			cfg.Sources = 1
			cfg.ExtraArgs = tt.extra
			if tt.grace > 0 {
				cfg.StopGrace = tt.grace
			}
			c, rec := startCluster(t, cfg)
			var sids []int
			for _, e := range c.Engines() {
				sids = append(sids, e.Info().Sid)
			}
			if tt.stall {
				if _, err := session.Signal(sids[0], unix.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				if !enginetest.Eventually(2*time.Second, func() bool { return c.Sources()[0].Info().State == event.StateStopped }) {
					t.Fatalf("source-0 never showed stopped: %+v", c.Sources()[0].Info())
				}
			}
			start := time.Now()
			if err := c.Stop(context.Background()); err != nil {
				t.Fatalf("stop: %v", err)
			}
			took := time.Since(start)
			if took < tt.wantAtLeas || took > tt.wantAtLeas+5*time.Second {
				t.Errorf("stop took %v, want within [%v, %v]", took, tt.wantAtLeas, tt.wantAtLeas+5*time.Second)
			}
			for i, sid := range sids {
				if live := liveMembers(t, sid); len(live) > 0 {
					t.Errorf("session %d still has live processes %v after Stop", sid, live)
				}
				in := c.Engines()[i].Info()
				if in.State != event.StateExited || in.Exit != tt.wantExit {
					t.Errorf("%s: state %s exit %q, want exited %q", in.Name, in.State, in.Exit, tt.wantExit)
				}
			}
			if got := rec.states("decoder"); got[len(got)-1] != event.StateExited {
				t.Errorf("decoder changes %v: last is not exited", got)
			}
			if n := len(readSessions(t, cfg.OutDir).Engines); n != 0 {
				t.Errorf("sessions.json still names %d engines after Stop", n)
			}
			if err := c.Stop(context.Background()); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestStartFailureNamesEngineExitStatusAndLastLines(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.DecoderArgs = []string{enginetest.FlagFail + "=3"}
	rec := newRecorder()
	cfg.OnChange = rec.onChange
	t.Cleanup(func() { killSessions(rec.allSids()) })
	_, err := runner.Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("start succeeded with a decoder that exits 3")
	}
	for _, want := range []string{"decoder", "exited with code 3 before it was ready", "failing on purpose with code 3", "decoder.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if code := exitcode.Code(err); code != exitcode.Usage {
		t.Errorf("exit code %d, want %d", code, exitcode.Usage)
	}
	for _, sid := range rec.allSids() {
		if live := liveMembers(t, sid); len(live) > 0 {
			t.Errorf("session %d left running after the failed start: %v", sid, live)
		}
	}
}

func TestFixedPortTakenIsUsageErrorNamingPortAndHolder(t *testing.T) {
	tests := []struct {
		name  string
		ports func(p int) runner.Ports
		what  string
	}{
		{"source HTTP", func(p int) runner.Ports { return runner.Ports{SourceHTTP: p} }, "source-0 HTTP"},
		{"decoder HTTP", func(p int) runner.Ports { return runner.Ports{DecoderHTTP: p} }, "decoder HTTP"},
		{"P2P", func(p int) runner.Ports { return runner.Ports{P2P: p} }, "source-0 P2P"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			cfg := fakeConfig(t)
			cfg.Ports = tt.ports(port)
			_, err = runner.Start(context.Background(), cfg)
			if err == nil {
				t.Fatal("start succeeded on a taken fixed port")
			}
			want := tt.what + " port " + strconv.Itoa(port) + " is in use by pid " + strconv.Itoa(os.Getpid())
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			if code := exitcode.Code(err); code != exitcode.Usage {
				t.Errorf("exit code %d, want %d", code, exitcode.Usage)
			}
			if _, err := os.Stat(filepath.Join(cfg.OutDir, "source-0.log")); err == nil {
				t.Error("an engine was started although a fixed port was taken")
			}
		})
	}
}

func TestRestartUsesSamePortsInNewSession(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c, rec := startCluster(t, cfg)
	src := c.Sources()[0]
	before := src.Info()
	if err := src.Restart(context.Background(), nil); err != nil {
		t.Fatalf("restart: %v", err)
	}
	after := src.Info()
	if after.Sid == before.Sid || after.State != event.StateReady || after.Restarts != 1 {
		t.Errorf("after restart: %+v (before sid %d), want a new session, ready, 1 restart", after, before.Sid)
	}
	if after.HTTPPort != before.HTTPPort || after.P2PPort != before.P2PPort {
		t.Errorf("ports moved from %d/%d to %d/%d", before.HTTPPort, before.P2PPort, after.HTTPPort, after.P2PPort)
	}
	if live := liveMembers(t, before.Sid); len(live) > 0 {
		t.Errorf("old session %d still has %v", before.Sid, live)
	}
	want := []event.State{event.StateStarting, event.StateReady, event.StateRestarting, event.StateStarting, event.StateReady}
	if !enginetest.Eventually(2*time.Second, func() bool { return slices.Equal(rec.states("source-0"), want) }) {
		t.Errorf("changes %v, want %v", rec.states("source-0"), want)
	}
	entries := readSessions(t, cfg.OutDir).Engines
	if i := slices.IndexFunc(entries, func(e runner.SessionEntry) bool { return e.Engine == "source-0" }); i < 0 || entries[i].Sid != after.Sid {
		t.Errorf("sessions.json %+v does not name the new session %d", entries, after.Sid)
	}
}

func TestRemoveLeavesDownAndRestoreBringsBack(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c, _ := startCluster(t, cfg)
	src := c.Sources()[0]
	before := src.Info()
	if err := src.Remove(context.Background(), nil); err != nil {
		t.Fatalf("remove: %v", err)
	}
	in := src.Info()
	if in.State != event.StateRemoved || in.Pid != 0 {
		t.Errorf("after remove: %+v, want removed with no pid", in)
	}
	if live := liveMembers(t, before.Sid); len(live) > 0 {
		t.Errorf("removed session %d still has %v", before.Sid, live)
	}
	if err := src.Remove(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "already removed") {
		t.Errorf("second remove: %v, want 'already removed'", err)
	}
	if err := src.Restore(context.Background()); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if in := src.Info(); in.State != event.StateReady || in.Sid == before.Sid || in.HTTPPort != before.HTTPPort {
		t.Errorf("after restore: %+v", in)
	}
	if err := src.Restore(context.Background()); err == nil || !strings.Contains(err.Error(), "not removed") {
		t.Errorf("restore of a ready engine: %v, want 'not removed'", err)
	}
}

func TestCrashedFrontEndIsExitedAndItsCoreKilled(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c, rec := startCluster(t, cfg)
	src := c.Sources()[0]
	in := src.Info()
	if err := unix.Kill(in.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !enginetest.Eventually(3*time.Second, func() bool { return len(liveMembers(t, in.Sid)) == 0 }) {
		t.Fatalf("core of crashed %s still alive: %v", src.Name(), liveMembers(t, in.Sid))
	}
	// The leader is a zombie (not live) a moment before it is reaped.
	if !enginetest.Eventually(2*time.Second, func() bool { return src.Info().State == event.StateExited }) {
		t.Fatalf("after crash: %+v, want exited", src.Info())
	}
	if got := src.Info(); got.Exit != "signal killed" {
		t.Errorf("after crash: exit %q, want 'signal killed'", got.Exit)
	}
	// OnChange runs on the dispatcher's goroutine, a moment later.
	if !enginetest.Eventually(2*time.Second, func() bool { got := rec.states("source-0"); return got[len(got)-1] == event.StateExited }) {
		t.Errorf("changes %v: last is not exited", rec.states("source-0"))
	}
}

func TestCancelledContextStopsCluster(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	cfg.OnChange = rec.onChange
	t.Cleanup(func() { killSessions(rec.allSids()) })
	c, err := runner.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sids []int
	for _, e := range c.Engines() {
		sids = append(sids, e.Info().Sid)
	}
	cancel()
	for _, sid := range sids {
		if !enginetest.Eventually(5*time.Second, func() bool { return len(liveMembers(t, sid)) == 0 }) {
			t.Errorf("session %d alive 5 s after the context was cancelled", sid)
		}
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("Stop after the automatic stop: %v", err)
	}
	if err := c.Sources()[0].Restart(context.Background(), nil); err == nil {
		t.Error("restart after stop succeeded")
	}
}

func TestWaitReadyFailsWhenNotReadyInTime(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	cfg.ReadyTimeout = 300 * time.Millisecond
	// A load far longer than any delay a busy machine adds: a start that
	// ignored the ready timeout is told apart by a minute, not a margin.
	cfg.ExtraArgs = []string{enginetest.FlagStartupDelay + "=2m"}
	rec := newRecorder()
	cfg.OnChange = rec.onChange
	t.Cleanup(func() { killSessions(rec.allSids()) })
	start := time.Now()
	_, err := runner.Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "not ready after 300ms") {
		t.Fatalf("start error %v, want 'not ready after 300ms'", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("failed start took %v: ready timeout not honoured", took)
	}
	if !errors.Is(err, err) || exitcode.Code(err) != exitcode.Usage {
		t.Errorf("exit code %d, want 2", exitcode.Code(err))
	}
}
