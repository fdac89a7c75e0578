package cli_test

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/runner"
)

// TestLeftEngineIsWarnedAboutAndCleanedUp: a sessions.json whose owner is
// gone names a process that is still alive (an engine a crashed run left
// behind). A new run in that folder warns about it; `p2pfault cleanup DIR`
// ends it, after checking it is still that process. DIR may be the run's
// folder or, for a slice, the folder that holds its rows.
func TestLeftEngineIsWarnedAboutAndCleanedUp(t *testing.T) {
	for _, tt := range []struct {
		name, row string
		underRuns bool // the folder is under ./p2pfault-runs, which every run also scans
	}{{"run folder", "", false}, {"slice folder", "main-kill", false}, {"run folder under ./p2pfault-runs", "", true}} {
		t.Run(tt.name, func(t *testing.T) {
			loner := exec.Command("sleep", "300")
			loner.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := loner.Start(); err != nil {
				t.Fatal(err)
			}
			pid := loner.Process.Pid
			reaped := make(chan struct{})
			go func() { _ = loner.Wait(); close(reaped) }()
			t.Cleanup(func() {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				<-reaped
			})
			dir := t.TempDir()
			if tt.underRuns {
				t.Chdir(dir)
				dir = filepath.Join("p2pfault-runs", "old")
			}
			if err := os.MkdirAll(filepath.Join(dir, tt.row), 0o755); err != nil {
				t.Fatal(err)
			}
			writeSessions(t, filepath.Join(dir, tt.row), pid, []string{"sleep", "300"})

			code, stdout, stderr := runStoppedBeforeEngines(t, dir)
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s", code, stderr.String())
			}
			want := "warning: 1 engine(s) of an earlier run in " + filepath.Join(dir, tt.row) + " are still alive"
			if n := strings.Count(stderr.String(), want); n != 1 {
				t.Fatalf("stderr has %q %d times, want once:\n%s", want, n, stderr.String())
			}

			stdout.Reset()
			if code := cli.Main([]string{"cleanup", dir}, strings.NewReader(""), stdout, stderr); code != 0 {
				t.Fatalf("cleanup exit %d\n%s%s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "ended 1 engine") {
				t.Fatalf("cleanup output: %s", stdout.String())
			}
			select {
			case <-reaped:
			case <-time.After(10 * time.Second):
				t.Fatalf("the left engine (pid %d) is still alive 10 s after cleanup", pid)
			}
		})
	}
}

// writeSessions records pid, started as cmdline, as source-0 of a run
// whose p2pfault is gone.
func writeSessions(t *testing.T, dir string, pid int, cmdline []string) {
	t.Helper()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+1:])
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// A real pid with a start time that does not match: a dead owner.
	owner := runner.ProcID{Pid: os.Getpid(), StartTicks: 1}
	entry := runner.SessionEntry{Engine: "source-0", Pid: pid, Sid: pid, StartTicks: ticks,
		Argv: cmdline, Cmdlines: runner.Cmdlines{pid: cmdline}, Owner: owner, BootID: strings.TrimSpace(string(boot))}
	b, err := json.Marshal(map[string]any{"owner": owner, "engines": []runner.SessionEntry{entry}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runner.SessionsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runStoppedBeforeEngines runs p2pfault headless with --out dir and a
// decoder port that is taken: the run checks its folder (the warnings
// about an earlier run's records) and ends, exit 2, before any engine
// starts.
func runStoppedBeforeEngines(t *testing.T, dir string) (code int, stdout, stderr *bytes.Buffer) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	code = cli.Main([]string{"run", "--headless", "--out", dir, "--decoder-port", port}, strings.NewReader(""), stdout, stderr)
	return code, stdout, stderr
}
