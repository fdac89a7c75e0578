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

// waitEvent waits for events.jsonl in out to hold an event ok accepts.
func waitEvent(t *testing.T, out, what string, limit time.Duration, ok func(event.Event) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if f, err := os.Open(filepath.Join(out, "events.jsonl")); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				var ev event.Event
				if json.Unmarshal(sc.Bytes(), &ev) == nil && ok(ev) {
					f.Close()
					return
				}
			}
			f.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s in %s within %v", what, out, limit)
}

// TestInterruptBeforeABoundBrokeReadsInterrupted: main's stall on the
// virtual cluster, the run ended (its context cancelled, as a signal does
// in cli.Main) one second into the stall, when its pulls hang but none is
// past a bound yet. The run exits 130 and every face says INTERRUPTED,
// not FAIL: the headless table, the line under it, report.json, junit.xml
// (an error, no failure); and `p2pfault report` says the same of the
// events cut before their end (a crash). The other side, a bound already
// broken at the cut, is TestInterruptMidStallReportsPendingPullsPastTheBound's.
func TestInterruptBeforeABoundBrokeReadsInterrupted(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan virtualRun, 1)
		go func() { done <- runVirtualCtx(t, ctx, "run", "--headless", "--case", "stall", "--out", out) }()
		waitEvent(t, out, "stall window", 90*time.Second, func(ev event.Event) bool { return ev.Kind == event.KindWindow })
		time.Sleep(time.Second) // on the bubble's clock: 1 s into the stall
		cancel()
		r = <-done
	})
	log := r.stdout + r.stderr
	if r.code != 130 {
		t.Fatalf("exit %d after the interrupt, want 130\n%s", r.code, log)
	}
	table, _, _ := strings.Cut(r.stdout[strings.Index(r.stdout, "\narm "):], "\n\n")
	if !strings.Contains(table, "main  stall  INTERRUPTED") || strings.Contains(table, "FAIL") {
		t.Fatalf("headless table:\n%s\nwant main/stall INTERRUPTED\n%s", table, log)
	}
	if !strings.Contains(r.stdout, "main/stall: INTERRUPTED (interrupted): no bound was broken before the cut") {
		t.Errorf("no line saying why the row is INTERRUPTED:\n%s", r.stdout)
	}
	row := readReport(t, out).Rows[0]
	if row.Result != "interrupted" || row.CutShort != "interrupted" || row.Passed {
		t.Fatalf("report.json row result %q cut_short %q passed %v, want interrupted", row.Result, row.CutShort, row.Passed)
	}
	junit, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(junit, []byte(`failures="0" errors="`)) || !bytes.Contains(junit, []byte(`<error message="interrupted" type="interrupted">`)) {
		t.Errorf("junit.xml has failures or no error for the cut:\n%s", junit)
	}

	// The same events without their final verdict and end event, the last
	// line cut mid-way: a crash.
	crashed := t.TempDir()
	stream := withoutTheEnd(t, out)
	if err := os.WriteFile(filepath.Join(crashed, "events.jsonl"), []byte(stream[:len(stream)-10]), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"report", crashed}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("report of the crashed stream: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"the run did not end: cut short", "main  stall  INTERRUPTED", "main/stall: INTERRUPTED (the run did not end: cut short"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report of the crashed stream does not say %q:\n%s", want, stdout.String())
		}
	}
	if again := readReport(t, crashed).Rows[0]; again.Result != "interrupted" {
		t.Errorf("report.json of the crashed stream: result %q, want interrupted", again.Result)
	}
}

// withoutTheEnd is the events of the run in out without its final verdict
// and its end event, as a crash before them leaves them, one line each.
func withoutTheEnd(t *testing.T, out string) string {
	t.Helper()
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
	return strings.Join(kept, "\n")
}
