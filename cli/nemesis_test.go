package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/netfault"
)

// startNemesis starts a nemesis run drawing only kind, its first fault 2 s
// after warm-up (10 s at time scale 0.2), each fault at least 3 s long.
func startNemesis(t *testing.T, out, kind string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd, log := startP2pfault(t, "run", "--headless", "--nemesis", "random", "--nemesis-seed", "7",
		"--nemesis-kinds", kind, "--nemesis-length", "30s", "--nemesis-length-spread", "15s",
		"--duration", "10m", "--time-scale", "0.2",
		"--free-ports", "--engine-arg=--sim-startup-delay=0s", "--out", out)
	return cmd, log
}

// eventsSay waits until the run's events hold want.
func eventsSay(t *testing.T, out, want string, limit time.Duration, log *bytes.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(out, "events.jsonl"))
		if strings.Contains(string(b), want) {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the events never said %s within %v\n%s", want, limit, log.String())
	return ""
}

// TestSIGKILLMidNemesisStallLeavesNoEngine: a nemesis run SIGKILLed while
// its stall holds a source stopped leaves no engine alive (the stopped
// ones too), and its schedule was in the events before the fault.
func TestSIGKILLMidNemesisStallLeavesNoEngine(t *testing.T) {
	out := t.TempDir()
	cmd, log := startNemesis(t, out, "stall")
	pids := waitEngines(t, out, 3, time.Minute, log)
	sids := map[int]int{}
	for _, p := range pids {
		sids[p], _, _ = procSession(p)
	}
	evs := eventsSay(t, out, `"state":"stopped"`, 30*time.Second, log)
	if s, f := strings.Index(evs, `"kind":"schedule"`), strings.Index(evs, `"kind":"fault"`); s < 0 || f < s {
		t.Errorf("the schedule event (at %d) is not before the first fault (at %d)", s, f)
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// A pid is still the engine's while it is alive in the session it was
	// in at the baseline: a pid the kernel gave to another process since
	// (other tests fork too) is not.
	ours := func() []int {
		var alive []int
		for _, p := range alivePids(pids) {
			if sid, _, ok := procSession(p); ok && sid == sids[p] {
				alive = append(alive, p)
			}
		}
		return alive
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(ours()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive := ours(); len(alive) > 0 {
		var what []string
		for _, p := range alive {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			what = append(what, fmt.Sprintf("%d: stat %q, cmdline %q", p, strings.TrimSpace(string(stat)), strings.ReplaceAll(string(cmdline), "\x00", " ")))
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		t.Fatalf("5 s after SIGKILL of p2pfault mid-stall, engine processes are still alive:\n%s\nrun:\n%s", strings.Join(what, "\n"), log.String())
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("cleanup: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestSIGKILLMidNemesisPartitionIsUndoneByCleanup: a nemesis run SIGKILLed
// while its partition is in force leaves the firewall table in the kernel,
// recorded; `p2pfault cleanup DIR` deletes it and says which partition it
// healed.
func TestSIGKILLMidNemesisPartitionIsUndoneByCleanup(t *testing.T) {
	needNet(t)
	out := t.TempDir()
	cmd, log := startNemesis(t, out, "partition")
	var table, fault string
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && table == "" {
		if recs := recordedTables(t, out); len(recs) == 1 && len(recs[0].Faults) == 1 {
			if names, _ := netfault.Tables(); slices.Contains(names, recs[0].Table) {
				table, fault = recs[0].Table, recs[0].Faults[0]
				t.Cleanup(func() { _, _ = netfault.DeleteTable(table) })
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if table == "" {
		t.Fatalf("no partition in force within a minute\n%s", log.String())
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if names, _ := netfault.Tables(); !slices.Contains(names, table) {
		t.Fatalf("table %s is gone after a SIGKILL of p2pfault: nothing for cleanup to show", table)
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("cleanup: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	said := "firewall table inet " + table + ": deleted; " + fault + " healed by cleanup\n"
	if !strings.Contains(stdout.String(), said) {
		t.Errorf("cleanup's stdout lacks %q:\n%s", said, stdout.String())
	}
	assertTableGone(t, table, "after `p2pfault cleanup`")
	if recs := recordedTables(t, out); len(recs) != 0 {
		t.Errorf("sessions.json still names %v after cleanup", recs)
	}
}
