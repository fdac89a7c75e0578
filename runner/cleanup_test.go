package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/enginetest"
	"p2pfault/internal/sessiontest"
	"p2pfault/internal/syncbuf"
	"p2pfault/netfault"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// startLoner starts a fake engine by hand in a session of its own and
// without Pdeathsig, like an engine a crashed run could leave behind.
func startLoner(t *testing.T) runner.SessionEntry {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Port 0: the kernel picks, nothing else matters here.
	args := []string{"sim", "serve", "m", "--port", "0", "--kv-transfer-config",
		`{"kv_connector_extra_config":{"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":0}]}}`}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), testEnv()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Reap it as soon as it exits so that "gone" means gone, as it would be
	// under init.
	reaped := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(reaped)
	}()
	t.Cleanup(func() {
		killSessions([]int{pid})
		<-reaped
		if t.Failed() {
			t.Logf("loner session %d said:\n%s", pid, out.String())
		}
	})
	// Ready, not only two members: between its fork and its exec the core
	// is already a second member, a copy of the front end, and a core that
	// then fails to start would leave one. The fake says "engine ready"
	// once its core holds the P2P port and its HTTP port is bound.
	if !enginetest.Eventually(10*time.Second, func() bool {
		return strings.Contains(out.String(), "engine ready") && len(liveMembers(t, pid)) == 2
	}) {
		t.Fatalf("loner session %d never got ready with its core: live %v\n%s", pid, liveMembers(t, pid), out.String())
	}
	st, err := session.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{self}, args...)
	return runner.SessionEntry{Engine: "source-0", Pid: pid, Sid: pid, StartTicks: st.StartTicks, Argv: argv, Cmdlines: runner.Cmdlines{pid: argv}}
}

func writeRecord(t *testing.T, dir string, owner runner.ProcID, entries ...runner.SessionEntry) {
	t.Helper()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		entries[i].Owner = owner
		entries[i].BootID = strings.TrimSpace(string(boot))
	}
	b, err := json.Marshal(map[string]any{"owner": owner, "engines": entries})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runner.SessionsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deadOwner is a p2pfault that no longer runs: a real pid with a start
// time that does not match.
func deadOwner() runner.ProcID { return runner.ProcID{Pid: os.Getpid(), StartTicks: 1} }

func TestCleanupEndsWhatTheRecordNamesAndOnlyThat(t *testing.T) {
	left := startLoner(t)
	bystander := startLoner(t)
	stale := bystander
	stale.Engine, stale.StartTicks = "source-1", bystander.StartTicks+1 // pid reused by someone else
	dir := t.TempDir()
	writeRecord(t, dir, deadOwner(), left, stale)

	lo, err := runner.Leftovers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(lo) != 1 || lo[0].Sid != left.Sid || lo[0].OwnerAlive || len(lo[0].Live) != 2 {
		t.Fatalf("leftovers %+v, want only session %d with 2 live pids and a dead owner", lo, left.Sid)
	}

	var out bytes.Buffer
	n, err := runner.Cleanup(context.Background(), dir, netfault.Host{}, &out)
	if err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out.String())
	}
	if n != 1 {
		t.Errorf("cleanup ended %d sessions, want 1:\n%s", n, out.String())
	}
	if live := liveMembers(t, left.Sid); len(live) > 0 {
		t.Errorf("left-behind session %d still has %v", left.Sid, live)
	}
	if live := liveMembers(t, bystander.Sid); len(live) != 2 {
		t.Errorf("bystander session %d (named with a wrong start time) was touched: live %v", bystander.Sid, live)
	}
	for _, want := range []string{"source-0: ended session", "source-1: session " + strconv.Itoa(stale.Sid) + " is already gone"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("cleanup report lacks %q:\n%s", want, out.String())
		}
	}
	if lo, _ := runner.Leftovers(dir); len(lo) != 0 {
		t.Errorf("leftovers after cleanup: %+v", lo)
	}
}

// TestCleanupLeavesAProcessWhoseCommandLineIsNotTheRecorded: a record
// naming a live process by its pid, start time and session, but with the
// command line of an engine it is not (or with none), does not get it
// ended; cleanup says why and keeps the entry.
func TestCleanupLeavesAProcessWhoseCommandLineIsNotTheRecorded(t *testing.T) {
	pid := sessiontest.Sleeper(t, 300)
	st, err := session.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	engine := []string{"vllm", "serve", "m"}
	for _, tt := range []struct {
		name     string
		cmdlines runner.Cmdlines
		why      string
	}{
		{"another command line", runner.Cmdlines{pid: engine}, "pid " + strconv.Itoa(pid) + " is `sleep 300`, not the recorded `vllm serve m`"},
		{"none recorded", nil, "pid " + strconv.Itoa(pid) + " (`sleep 300`) has no command line in the record to check it by"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRecord(t, dir, deadOwner(), runner.SessionEntry{Engine: "not-an-engine", Pid: pid, Sid: pid, StartTicks: st.StartTicks, Argv: engine, Cmdlines: tt.cmdlines})
			if lo, err := runner.Leftovers(dir); err != nil || len(lo) != 0 {
				t.Errorf("leftovers %+v %v: a process that is not the engine is not one", lo, err)
			}
			var out bytes.Buffer
			n, err := runner.Cleanup(context.Background(), dir, netfault.Host{}, &out)
			if err != nil || n != 0 {
				t.Fatalf("cleanup: %d %v\n%s", n, err, out.String())
			}
			want := "not-an-engine: session " + strconv.Itoa(pid) + ": " + tt.why + ": left alone"
			if !strings.Contains(out.String(), want) {
				t.Errorf("cleanup said %q, want %q", out.String(), want)
			}
			if live := liveMembers(t, pid); len(live) != 1 {
				t.Fatalf("the process named with another command line was ended: live %v", live)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, runner.SessionsFile)); !strings.Contains(string(b), `"not-an-engine"`) {
				t.Errorf("the entry was dropped from the record:\n%s", b)
			}
		})
	}
}

func TestCleanupLeavesSessionsOfRunningP2pfaultAlone(t *testing.T) {
	engine := startLoner(t)
	owner := startLoner(t) // stands for a p2pfault that still runs
	dir := t.TempDir()
	writeRecord(t, dir, runner.ProcID{Pid: owner.Pid, StartTicks: owner.StartTicks}, engine)
	var out bytes.Buffer
	n, err := runner.Cleanup(context.Background(), dir, netfault.Host{}, &out)
	if err != nil || n != 0 {
		t.Fatalf("cleanup: %d, %v", n, err)
	}
	if !strings.Contains(out.String(), "which is still running; left alone") {
		t.Errorf("report: %s", out.String())
	}
	if live := liveMembers(t, engine.Sid); len(live) != 2 {
		t.Errorf("session of a running p2pfault was touched: %v", live)
	}
	lo, _ := runner.Leftovers(dir)
	if len(lo) != 1 || !lo[0].OwnerAlive {
		t.Errorf("leftovers %+v, want one with its owner alive", lo)
	}
}

func TestCleanupWithoutRecordSaysSo(t *testing.T) {
	var out bytes.Buffer
	n, err := runner.Cleanup(context.Background(), t.TempDir(), netfault.Host{}, &out)
	if err != nil || n != 0 || !strings.Contains(out.String(), "no sessions.json") {
		t.Errorf("cleanup of an empty folder: %d, %v, %q", n, err, out.String())
	}
}

func TestNewRunKeepsLeftoversOfPreviousRunInRecord(t *testing.T) {
	left := startLoner(t)
	cfg := fakeConfig(t)
	writeRecord(t, cfg.OutDir, deadOwner(), left)
	cfg.Sources = 1
	c, _ := startCluster(t, cfg)
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, runner.SessionsFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Leftovers []runner.SessionEntry `json:"leftovers"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Leftovers) != 1 || rec.Leftovers[0].Sid != left.Sid {
		t.Fatalf("new run's record lost the leftover session %d: %s", left.Sid, b)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if n, err := runner.Cleanup(context.Background(), cfg.OutDir, netfault.Host{}, &out); err != nil || n != 1 {
		t.Errorf("cleanup of the carried leftover: %d, %v\n%s", n, err, out.String())
	}
	if live := liveMembers(t, left.Sid); len(live) > 0 {
		t.Errorf("leftover session %d still alive: %v", left.Sid, live)
	}
}

// TestNewRunDoesNotCarryARecordItCannotTrust: a sessions.json others
// could write is not carried into the new run's record (which would make
// it the user's own, 0600), and the new record replaces it.
func TestNewRunDoesNotCarryARecordItCannotTrust(t *testing.T) {
	left := startLoner(t)
	cfg := fakeConfig(t)
	writeRecord(t, cfg.OutDir, deadOwner(), left)
	path := filepath.Join(cfg.OutDir, runner.SessionsFile)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	cfg.Sources = 1
	startCluster(t, cfg)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Leftovers []runner.SessionEntry `json:"leftovers"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Leftovers) != 0 {
		t.Errorf("the new record carries the untrusted one's sessions: %s", b)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("sessions.json %v %v, want the new run's, mode 0600", st.Mode(), err)
	}
}
