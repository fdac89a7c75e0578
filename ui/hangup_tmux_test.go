package ui

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDashboardInTmuxClosedTerminal: the dashboard's terminal closes (the
// tmux session is killed: SIGHUP, and reads of the terminal fail) while a
// stall of source-0 with no end holds its session stopped. That is `q`
// after an interruption: p2pfault exits 130 saying it was interrupted,
// no process of the run is left (the stopped ones included), and the
// reports are written.
func TestDashboardInTmuxClosedTerminal(t *testing.T) {
	bin := e2eBinary(t, "the closed-terminal dashboard test")
	const wait = 90 * time.Second // generous: two shared cores, others compiling
	out := filepath.Join(t.TempDir(), "run")
	rp := watchRun(t, out)
	// The shell traps SIGHUP (a trap, not an ignore, so p2pfault gets it
	// with its default disposition) to write p2pfault's exit status once
	// the pane is gone.
	script := "trap : HUP; NO_COLOR=1 " + strconv.Quote(bin) + " run --free-ports --time-scale 0.2 --out " + strconv.Quote(out) +
		` --timeline "at 1s stall source-0" 2>` + strconv.Quote(out+".err") + "; echo $? >" + strconv.Quote(out+".rc")
	pane := startPane(t, "p2pfault-hup", "dash", paneWidth, 40, script)
	pane.waitFor("source-0 STALLED", wait, func(s string) bool { return strings.Contains(s, "source-0  STALLED") })
	if rec, err := rp.note(); err != nil || len(rec.Engines) != 3 {
		t.Fatalf("sessions.json while running: %v, %d engines (want 3)", err, len(rec.Engines))
	}
	if _, err := pane.tmux("kill-session", "-t", pane.name); err != nil {
		t.Fatal(err)
	}
	rc := waitFile(t, out+".rc", wait)
	stderr, _ := os.ReadFile(out + ".err")
	if strings.TrimSpace(rc) != "130" {
		t.Errorf("p2pfault exited %q after its terminal closed, want 130\nstderr:\n%s", rc, stderr)
	}
	// SIGHUP or the failed read of the terminal, whichever p2pfault saw
	// first: both are the same interruption.
	if !strings.Contains(string(stderr), "interrupted") {
		t.Errorf("stderr does not say the run was interrupted:\n%s", stderr)
	}
	if left := rp.left(); len(left) > 0 {
		t.Errorf("processes left after the terminal closed: %s", strings.Join(left, "; "))
	}
	for _, f := range []string{"report.md", "report.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("no %s after the terminal closed: %v", f, err)
		}
	}
}

// waitFile waits until path holds a line and returns what it holds.
func waitFile(t *testing.T, path string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was not written within %v", path, limit)
	return ""
}
