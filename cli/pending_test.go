package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
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

// TestInterruptMidStallReportsPendingPullsPastTheBound: main's stall on
// the virtual cluster at time scale 1, the run ended (its context
// cancelled, as SIGTERM does in cli.Main; the signal itself is
// TestSignalledP2pfaultResumesAnAttachedStall's) while its pulls hang past
// the faulted_max bound and none has returned. The headless progress said
// so when it happened, the run exits 130 with faulted_max failed by those
// pulls in report.json, and `p2pfault report` rebuilding from events.jsonl
// gives the same checks.
func TestInterruptMidStallReportsPendingPullsPastTheBound(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var live string
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan virtualRun, 1)
		go func() { done <- runVirtualCtx(t, ctx, "run", "--headless", "--case", "stall", "--out", out) }()
		live = waitLiveFailure(t, out, "faulted_max", 90*time.Second, &bytes.Buffer{})
		cancel()
		r = <-done
	})
	log := bytes.NewBufferString(r.stdout + r.stderr)
	if r.code != 130 {
		t.Fatalf("exit %d after the interrupt, want 130\n%s", r.code, log)
	}
	if !strings.Contains(log.String(), "check faulted_max FAILED: ") || !strings.Contains(log.String(), live) {
		t.Errorf("the progress lines do not say faulted_max failed by pulls in flight (%q):\n%s", live, log)
	}

	rep := readReport(t, out)
	row := rep.Rows[0]
	var fm string
	for _, c := range row.Checks {
		if c.Name == "faulted_max" {
			// On the fake clock the run's end finds the pulls in flight:
			// judged at their age, past the 15 s bound.
			t.Logf("faulted_max: %s", c.Detail)
			if c.Passed || !strings.Contains(c.Detail, "naming the faulted source") || !strings.Contains(c.Detail, "in flight past 15.0s") {
				t.Errorf("report.json faulted_max = %+v; want failed by pulls in flight past 15.0s", c)
			}
			fm = c.Detail
		}
	}
	if fm == "" || row.Passed || row.Result != "fail" || row.CutShort != "interrupted" {
		t.Fatalf("report.json row %+v: want faulted_max failed and the row with it, a FAIL though cut short", row)
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
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, "events.jsonl"), []byte(withoutTheEnd(t, out)+"\n"), 0o644); err != nil {
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
