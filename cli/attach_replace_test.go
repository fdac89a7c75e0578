package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/attach"
	"p2pfault/event"
	"p2pfault/report"
)

// TestAttachedReplaceInPDMode: an attach file that says `mode: pd` and
// gives source-0 a replace command (a script standing in for kubectl: it
// SIGKILLs the engine's session, starts a new engine on other ports with
// setsid and prints `HOST:PORT P2P_HOST:P2P_PORT`). `run --case replace`
// then probes in pd mode, moves source-0 to the printed address once it
// answers there and names only that address from then on.
func TestAttachedReplaceInPDMode(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster for ~20 s")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	newHTTP, newP2P := loopbackPort(t), loopbackPort(t)
	t.Cleanup(func() {
		if l, err := attach.FindListener("127.0.0.1", newP2P); err == nil {
			endSession(l.Sid)
		}
	})
	// The new engine: the old one's command line on the new ports.
	argv := slices.Clone(srcs[0].argv)
	for i, a := range argv {
		switch {
		case a == strconv.Itoa(srcs[0].http):
			argv[i] = strconv.Itoa(newHTTP)
		case strings.Contains(a, `"port":`+strconv.Itoa(srcs[0].p2p)):
			argv[i] = strings.Replace(a, `"port":`+strconv.Itoa(srcs[0].p2p), `"port":`+strconv.Itoa(newP2P), 1)
		}
	}
	var quoted []string
	for _, a := range argv {
		quoted = append(quoted, "'"+a+"'")
	}
	script := filepath.Join(dir, "move-source")
	body := fmt.Sprintf("#!/bin/sh\necho \"moving $1\"\nkill -KILL -- -%d\nPYTHONHASHSEED=42 setsid %s >%s 2>&1 </dev/null &\necho 127.0.0.1:%d 127.0.0.1:%d\n",
		srcs[0].pid, strings.Join(quoted, " "), filepath.Join(dir, "new-source-0.log"), newHTTP, newP2P)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	faults := map[string]string{"source-0": fmt.Sprintf("\n      replace: [%s, \"{name}\"]", script)}
	file := writeAttachFile(t, dir, dec, srcs, faults, "mode: pd\n")
	out := filepath.Join(dir, "out")
	// A short run: the row's verdict (it passes as a kill's) is
	// TestReplaceInPDModeMovesThePullsToTheNewAddress's, on the virtual
	// cluster; this one asks for the command's mechanism.
	cmd, log := startP2pfault(t, "run", "--attach", file, "--headless", "--case", "replace", "--time-scale", "0.25", "--out", out,
		"--fault-at", "4s", "--recovery", "8s")
	code := waitExit(t, cmd, 3*time.Minute, log)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d, want a verdict (0 or 1)\n%s", code, tail(log.String(), 40))
	}
	runs, evs := pdReplaceRun(t, out) // main/pd/replace: the file's mode
	want := "127.0.0.1:" + strconv.Itoa(newP2P)
	var at time.Duration = -1
	for _, ev := range evs {
		if ev.Kind == event.KindAddress && ev.Address.Source == 0 && ev.Address.Prev != "" {
			if ev.Address.P2P != want || ev.Address.Prev != srcs[0].p2pAddr() || ev.Address.URL != "http://127.0.0.1:"+strconv.Itoa(newHTTP) {
				t.Errorf("address event %+v, want %s (http :%d) after %s", ev.Address, want, newHTTP, srcs[0].p2pAddr())
			}
			at = ev.Address.At
		}
	}
	if at < 0 {
		t.Fatalf("no address event for source-0's new engine\n%s", tail(log.String(), 40))
	}
	after := 0
	for _, s := range runs[0].Samples {
		if s.Source == 0 && s.Start >= at {
			after++
			if s.Peer != want {
				t.Errorf("trial %d sent at %v, after the switch at %v, names %s", s.Trial, s.Start, at, s.Peer)
			}
		}
	}
	if after == 0 {
		t.Error("no pull named source-0 after the switch")
	}
	if !strings.Contains(log.String(), "source-0: pulls name "+want) {
		t.Errorf("the output does not say the new address:\n%s", tail(log.String(), 40))
	}
}

// pdReplaceRun rebuilds the one run of out's events, checks it is
// main/pd/replace in mode pd, and returns it with its events.
func pdReplaceRun(t *testing.T, out string) ([]report.Run, []event.Event) {
	t.Helper()
	runs, err := report.RebuildAll(filepath.Join(out, report.FileEvents), t.TempDir())
	if err != nil || len(runs) != 1 {
		t.Fatalf("rebuild: %d runs, %v", len(runs), err)
	}
	if runs[0].Info.Mode != event.ModePD || runs[0].Name() != "main/pd/replace" {
		t.Errorf("run %s in mode %q, want main/pd/replace", runs[0].Name(), runs[0].Info.Mode)
	}
	return runs, eventsOf(t, filepath.Join(out, report.FileEvents))
}
