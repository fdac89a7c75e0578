package guard

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/internal/sessiontest"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

const mainEnv = "P2PFAULT_TEST_GUARD_MAIN"

// TestMain makes this binary the guard when mainEnv is set, as p2pfault's
// hidden subcommand will.
func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// stopped starts `sleep` in a session of its own, SIGSTOPs it and returns
// its identity; it is killed at cleanup.
func stopped(t *testing.T) runner.ProcID {
	t.Helper()
	pid := sessiontest.Sleeper(t, 60)
	if _, err := session.Signal(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := session.WaitStates(ctx, []int{pid}, session.Proc.Stopped, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st, _ := session.Stat(pid)
	return runner.ProcID{Pid: pid, StartTicks: st.StartTicks}
}

func config(t *testing.T, id runner.ProcID) Config {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Argv: []string{self}, Env: []string{mainEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		Log: filepath.Join(t.TempDir(), "guard.log"), Source: "source-0", Sid: id.Pid, Members: []runner.ProcID{id}}
}

func TestReleaseLeavesTheSessionAlone(t *testing.T) {
	id := stopped(t)
	g, err := Start(config(t, id))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := session.Stat(g.Pid()); err != nil || st.Sid != g.Pid() {
		t.Errorf("guard %+v %v: want a session of its own", st, err)
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	if s := sessiontest.State(t, id.Pid); s != 'T' {
		t.Errorf("state %c after release; the guard must not act", s)
	}
	if g.cmd.ProcessState == nil || g.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("guard exit %v", g.cmd.ProcessState)
	}
}

func TestEOFResumesTheSession(t *testing.T) {
	id := stopped(t)
	cfg := config(t, id)
	g, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Abandon(); err != nil {
		t.Fatal(err)
	}
	if s := sessiontest.State(t, id.Pid); s == 'T' {
		t.Error("still stopped after the guard saw EOF")
	}
	b, _ := os.ReadFile(cfg.Log)
	if !strings.Contains(string(b), "p2pfault's end closed") || !strings.Contains(string(b), "sent SIGCONT to session") {
		t.Errorf("guard log %q", b)
	}
}

func TestEOFDoesNotSignalAReusedSession(t *testing.T) {
	id := stopped(t)
	other := id
	other.StartTicks++ // a process that is not the one stalled
	cfg := config(t, other)
	g, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Abandon(); err != nil {
		t.Fatal(err)
	}
	if s := sessiontest.State(t, id.Pid); s != 'T' {
		t.Errorf("state %c: the guard signalled a session whose stalled process is gone", s)
	}
}

func TestEOFRunsTheResumeCommand(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "resumed")
	self, _ := os.Executable()
	g, err := Start(Config{Argv: []string{self}, Env: []string{mainEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Source: "source-1", Log: filepath.Join(dir, "g.log"),
		Resume: []string{"sh", "-c", "echo \"$0\" > " + mark, "source-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Abandon(); err != nil {
		t.Fatal(err)
	}
	lg, _ := os.ReadFile(filepath.Join(dir, "g.log"))
	t.Logf("%s", lg)
	b, err := os.ReadFile(mark)
	if err != nil || strings.TrimSpace(string(b)) != "source-1" {
		t.Errorf("resume command: %q %v", b, err)
	}
}

func TestStartRefusesBadConfigs(t *testing.T) {
	self, _ := os.Executable()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Source: "s", Sid: 5}, "no command to run the guard"},
		{Config{Argv: []string{self}, Source: "s"}, "give a session or a resume command"},
		{Config{Argv: []string{self}, Source: "s", Sid: 1, Members: []runner.ProcID{{Pid: 1}}}, "sessions 0 and 1 belong to the system"},
		{Config{Argv: []string{self}, Source: "s", Sid: 1234567}, "no stalled process given"},
		{Config{Argv: []string{self}, Env: []string{"X=1"}, Source: "s", Resume: []string{"true"}}, "did not get ready"},
	} {
		_, err := Start(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestRunCommand(t *testing.T) {
	out, code, err := RunCommand(context.Background(), []string{"sh", "-c", "echo out; echo err >&2; exit 4"}, 5*time.Second)
	if code != 4 || err == nil || err.Error() != "exited with status 4" || !strings.Contains(out, "out") || !strings.Contains(out, "err") {
		t.Errorf("%q %d %v", out, code, err)
	}
	// A timeout kills the whole group, a grandchild holding the output too.
	start := time.Now()
	_, _, err = RunCommand(context.Background(), []string{"sh", "-c", "sleep 30 & sleep 30"}, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") || time.Since(start) > 5*time.Second {
		t.Errorf("timeout: %v after %v", err, time.Since(start))
	}
	if _, _, err := RunCommand(context.Background(), []string{"/no/such/cmd"}, time.Second); err == nil {
		t.Error("a missing command ran")
	}
}

func TestBookAndResumeRecordedSkipOtherBootsAndGoneSessions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RecordFile)
	b, err := NewBook(path)
	if err != nil {
		t.Fatal(err)
	}
	id := stopped(t)
	dead := runner.ProcID{Pid: 1 << 22, StartTicks: 1}
	for _, s := range []Stall{
		{Source: "other-boot", Sid: id.Pid, Members: []runner.ProcID{id}, BootID: "not-this-boot", Owner: dead},
		{Source: "gone", Sid: 1 << 22, Members: []runner.ProcID{dead}, Owner: dead},
		{Source: "live", Sid: id.Pid, Members: []runner.ProcID{id}, Owner: dead, Cmdlines: runner.ReadCmdlines(id.Pid)},
	} {
		if err := b.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	n, err := ResumeRecorded(context.Background(), path, &out, nil)
	if err != nil || n != 1 {
		t.Fatalf("%d %v %q", n, err, out.String())
	}
	for _, want := range []string{"other-boot: stall recorded in another boot", "gone: session 4194304 is gone", "live: resumed session"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	if s := sessiontest.State(t, id.Pid); s == 'T' {
		t.Error("still stopped")
	}
	// Remove drops only this process's own stalls.
	if err := b.Add(Stall{Source: "mine", Sid: 99}); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove("mine"); err != nil {
		t.Fatal(err)
	}
	if rec, _ := ReadRecord(path); len(rec.Stalls) != 3 {
		t.Errorf("record after Remove: %+v", rec.Stalls)
	}
}
