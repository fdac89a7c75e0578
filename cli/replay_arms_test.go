package cli_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/event"
)

// TestReplayOfASeveralArmPDRunFindsEveryEnginesLog runs `run --arms
// main,fixed --mode pd --case none` briefly at time scale 0.25 and replays
// its folder: every engine of both arms that the events name has its own
// log found in its arm's folder (ARM-pd-none, the folder run wrote), from
// its launch line with its arm's flag; the replay's path to the folder is
// the run's.
func TestReplayOfASeveralArmPDRunFindsEveryEnginesLog(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs two clusters for ~15 s")
	}
	out := t.TempDir()
	bin := buildP2pfault(t) // plain engines: the race build would starve two clusters
	cmd, log := startCommand(t, bin, "run", "--arms", "main,fixed", "--mode", "pd", "--case", "none", "--duration", "4s",
		"--headless", "--time-scale", "0.25", "--engine-arg=--sim-startup-delay=0s", "--out", out)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("run exit %d (%v), want 0\n%s", code, err, log)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("run did not finish in 3 minutes\n%s", log)
	}
	for _, d := range []string{"main-pd-none", "fixed-pd-none"} {
		if st, err := os.Stat(filepath.Join(out, d)); err != nil || !st.IsDir() {
			t.Fatalf("no arm folder %s: %v\n%s", d, err, log)
		}
	}

	evs, tail, err := cli.OpenReplay(out)
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]bool{} // ARM/ENGINE
	var last time.Time
	for _, ev := range evs {
		if ev.Kind == event.KindEngine && ev.Engine != nil {
			engines[ev.Arm+"/"+ev.Engine.Name] = true
		}
		if ev.Wall.After(last) {
			last = ev.Wall
		}
	}
	var names []string
	for e := range engines {
		names = append(names, e)
	}
	sort.Strings(names)
	// Two sources and a decoder per arm, the default cluster.
	if len(names) != 6 {
		t.Fatalf("the events name engines %q, want 3 per arm", names)
	}
	flag := map[string]string{"main": "--p2p-pending-handshake=wait", "fixed": "--p2p-pending-handshake=prefill"}
	for _, e := range names {
		arm, name, _ := strings.Cut(e, "/")
		lines := tail(e, 10000, last)
		if len(lines) == 0 || strings.HasPrefix(lines[0], "replay: no log of") {
			t.Errorf("%s: the replay found no log: %q", e, lines)
			continue
		}
		launch := "==> p2pfault: " + name + " started"
		if !strings.HasPrefix(lines[0], launch) || !strings.Contains(lines[0], flag[arm]) {
			t.Errorf("%s: the log's first line %q, want %q... with %s (its arm's own log)", e, lines[0], launch, flag[arm])
		}
	}
}
