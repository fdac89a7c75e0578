package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/cli"
)

// TestRunArmsHeadlessGivesARowPerArm runs `run --arms main,fixed --case
// stall --headless` on the virtual cluster at time scale 1: one cluster
// per arm at once, the seed's verdicts (main fails the stall, fixed
// passes), exit 1, a row per arm in the table and report.json, a folder
// per arm with its own events and reports, and `report DIR` rebuilding the
// same table. (Each arm's own sessions.json and engine logs are real
// processes' records: TestKilledArmsRunLeavesNoEngine.)
func TestRunArmsHeadlessGivesARowPerArm(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var run virtualRun
	synctest.Test(t, func(t *testing.T) {
		run = runVirtual(t, "run", "--arms", "main,fixed", "--case", "stall", "--headless", "--out", out)
	})
	log := bytes.NewBufferString(run.stdout + run.stderr)
	if run.code != 1 {
		t.Fatalf("run exit %d, want 1 (main's stall fails)\n%s", run.code, log)
	}
	rowRE := regexp.MustCompile(`(?m)^(main|fixed) +stall +(FAIL|pass) .*$`)
	table := func(s string) []string { return rowRE.FindAllString(s, -1) }
	rows := table(log.String())
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "main") || !strings.Contains(rows[0], "FAIL") ||
		!strings.HasPrefix(rows[1], "fixed") || !strings.Contains(rows[1], "pass") {
		t.Fatalf("table rows %q, want main stall FAIL then fixed stall pass\n%s", rows, log)
	}
	for _, prefix := range []string{"main/stall  [", "fixed/stall ["} {
		if !strings.Contains(log.String(), prefix) {
			t.Errorf("no progress line prefixed %q", prefix)
		}
	}

	var rep sliceReport
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Arm != "main" || rep.Rows[0].Passed || rep.Rows[1].Arm != "fixed" || !rep.Rows[1].Passed {
		t.Errorf("report.json rows %+v, want main failed, fixed passed", rep.Rows)
	}
	for _, f := range []string{"events.jsonl", "report.md", "junit.xml", "report.html", "timeline-main-stall.svg", "timeline-fixed-stall.svg",
		"main-stall/events.jsonl", "main-stall/report.json",
		"fixed-stall/events.jsonl", "fixed-stall/report.json", "fixed-stall/report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// Each arm's own events are that arm's only.
	armEvents, _ := os.ReadFile(filepath.Join(out, "fixed-stall", "events.jsonl"))
	if bytes.Contains(armEvents, []byte(`"arm":"main"`)) {
		t.Error("fixed-stall/events.jsonl holds main's events")
	}

	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"report", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr.String())
	}
	if got := table(stdout.String()); strings.Join(got, "\n") != strings.Join(rows, "\n") {
		t.Errorf("report rebuilt\n%s\nwant the run's\n%s", strings.Join(got, "\n"), strings.Join(rows, "\n"))
	}
}

// TestKilledArmsRunLeavesNoEngine: SIGKILL a two-arm run after both arms
// reached their baseline; each arm recorded its engines in its own
// sessions.json, and within 2 s no engine of either arm is alive.
func TestKilledArmsRunLeavesNoEngine(t *testing.T) {
	out := t.TempDir()
	cmd, log := startP2pfault(t, "run", "--arms", "main,fixed", "--headless", "--case", "none", "--duration", "60s",
		"--engine-arg=--sim-startup-delay=0s", "--out", out)
	var pids []int
	for _, arm := range []string{"main-none", "fixed-none"} {
		p := waitEngines(t, filepath.Join(out, arm), 3, 90*time.Second, log)
		pids = append(pids, p...)
		// Each arm's engines log into its own folder.
		for _, f := range []string{"source-0.log", "source-1.log", "decoder.log"} {
			if _, err := os.Stat(filepath.Join(out, arm, f)); err != nil {
				t.Errorf("arm %s: %v", arm, err)
			}
		}
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for {
		alive := alivePids(pids)
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("2 s after SIGKILL of p2pfault, engine processes %v of the two arms are still alive", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// `cleanup DIR` reads both arms' records and finds nothing left.
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("cleanup exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "cleanup: ended 0 engine process(es)") {
		t.Errorf("cleanup after the engines died: %q", stdout.String())
	}
}
