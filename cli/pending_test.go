package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/event"
)

// waitLiveFailure waits for events.jsonl to hold a live verdict whose
// check name failed counting pulls in flight, and returns its detail.
func waitLiveFailure(t *testing.T, out, name string, limit time.Duration, log *bytes.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		f, err := os.Open(filepath.Join(out, "events.jsonl"))
		if err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				var ev event.Event
				if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Kind != event.KindVerdict || ev.Final {
					continue
				}
				for _, c := range ev.Verdict.Checks {
					if c.Name == name && !c.Passed && c.Pending > 0 && strings.Contains(c.Detail, "in flight past") {
						f.Close()
						return c.Detail
					}
				}
			}
			f.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no live verdict failing %s by pulls in flight within %v\n%s", name, limit, log)
	return ""
}

// pastBound reports whether a faulted_max detail names pulls past bound
// seconds: "... in flight past 3.8s ..." or "... took 4.1s (bound 3.8s)".
func pastBound(detail string, bound float64) bool {
	if strings.Contains(detail, fmt.Sprintf("in flight past %.1fs", bound)) {
		return true
	}
	m := regexp.MustCompile(`took (\d+(?:\.\d+)?)s \(bound ` + regexp.QuoteMeta(fmt.Sprintf("%.1f", bound)) + `s\)`).FindStringSubmatch(detail)
	if m == nil {
		return false
	}
	took, err := strconv.ParseFloat(m[1], 64)
	return err == nil && took > bound
}

// TestSIGTERMMidStallReportsPendingPullsPastTheBound: main's stall at
// time scale 0.25, SIGTERM while its pulls hang past the faulted_max bound
// and none has returned. The headless progress said so when it happened,
// the run exits 130 with faulted_max failed by those pulls in report.json,
// and `p2pfault report` rebuilding from events.jsonl gives the same checks.
func TestSIGTERMMidStallReportsPendingPullsPastTheBound(t *testing.T) {
	out := t.TempDir()
	cmd, log := startP2pfault(t, "run", "--headless", "--case", "stall", "--time-scale", "0.25",
		"--free-ports", "--engine-arg=--sim-startup-delay=0s", "--out", out)
	live := waitLiveFailure(t, out, "faulted_max", 90*time.Second, log)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, 60*time.Second, log); code != 130 {
		t.Fatalf("exit %d after SIGTERM, want 130\n%s", code, log)
	}
	if !strings.Contains(log.String(), "check faulted_max FAILED: ") || !strings.Contains(log.String(), live) {
		t.Errorf("the progress lines do not say faulted_max failed by pulls in flight (%q):\n%s", live, log)
	}

	rep := readReport(t, out)
	row := rep.Rows[0]
	var fm string
	for _, c := range row.Checks {
		if c.Name == "faulted_max" {
			// The pulls hanging at the SIGTERM fail it either way: judged
			// in flight at their age when the run's end found them so, or,
			// when the shutdown's cut answer reached the probe before the
			// final verdict, as ended after their age. Which comes first is
			// the machine's timing; both are past the bound.
			if c.Passed || !strings.Contains(c.Detail, "naming the faulted source") || !pastBound(c.Detail, 3.8) {
				t.Errorf("report.json faulted_max = %+v; want failed by pulls past 3.8s (in flight, or cut by the run's end)", c)
			}
			fm = c.Detail
		}
	}
	if fm == "" || row.Passed {
		t.Fatalf("report.json row %+v: want faulted_max failed and the row with it", row)
	}

	rebuilt := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"report", filepath.Join(out, "events.jsonl"), "--out", rebuilt}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	again := readReport(t, rebuilt).Rows[0]
	if len(again.Checks) != len(row.Checks) {
		t.Fatalf("rebuilt checks %+v, run's %+v", again.Checks, row.Checks)
	}
	for i := range row.Checks {
		if again.Checks[i] != row.Checks[i] {
			t.Errorf("rebuilt %+v, run's %+v", again.Checks[i], row.Checks[i])
		}
	}

	// Without the run's final verdict (a crash before it), the report
	// judges the events itself and reaches the same checks.
	data, err := os.ReadFile(filepath.Join(out, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev event.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if (ev.Kind == event.KindVerdict && ev.Final) || ev.Kind == event.KindEnd {
			continue
		}
		kept = append(kept, line)
	}
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, "events.jsonl"), []byte(strings.Join(kept, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := cli.Main([]string{"report", crashed}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("report of the crashed stream: exit %d: %s", code, stderr.String())
	}
	judged := readReport(t, crashed).Rows[0]
	for i := range row.Checks {
		if judged.Checks[i] != row.Checks[i] {
			t.Errorf("judged from the events: %+v, run's %+v", judged.Checks[i], row.Checks[i])
		}
	}
}
