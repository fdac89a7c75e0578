package cli_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/report"
)

// sliceReport is the part of report.json this test reads.
type sliceReport struct {
	TimeScale float64 `json:"time_scale"`
	Rows      []struct {
		Arm    string `json:"arm"`
		Case   string `json:"case"`
		Passed bool   `json:"passed"`
		Checks []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
			Detail string `json:"detail"`
		} `json:"checks"`
		Faulted struct {
			N      int     `json:"n"`
			Pulled int     `json:"pulled"`
			P50    float64 `json:"p50_s"`
			Max    float64 `json:"max_s"`
		} `json:"faulted"`
		Healthy struct {
			N      int     `json:"n"`
			Pulled int     `json:"pulled"`
			Max    float64 `json:"max_s"`
		} `json:"healthy"`
		Recovery *struct {
			N      int `json:"n"`
			Pulled int `json:"pulled"`
		} `json:"recovery"`
	} `json:"rows"`
}

// startP2pfault runs the test binary as p2pfault in a subprocess; the
// process is SIGKILLed if the test ends first (its engines die with it:
// they run with a parent-death signal).
func startP2pfault(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startCommand(t, self, args...)
}

// buildP2pfault builds the module's binary (without the race detector)
// into a temporary folder.
func buildP2pfault(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "p2pfault")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startCommand starts bin with args in a process group of its own and
// kills that group if the test ends first.
func startCommand(t *testing.T, bin string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// A -race binary sleeps 1 s at exit by default; engines exit often.
	cmd.Env = append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd, &out
}

// TestSliceGivesTheSeedsVerdictsAtCompressedTime runs the whole slice
// (main and fixed × stall, kill, remove) on the simulated cluster at time
// scale 0.25 and checks the seed's verdicts: main stall fails on the
// handshake timeout, everything else passes. Figures are asserted in
// windows with wide margins (the machine is shared and the engines run
// under the race detector); bounds at time scale s are s × the seed's.
func TestSliceGivesTheSeedsVerdictsAtCompressedTime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs six clusters for ~25 s")
	}
	const scale = 0.25
	out := t.TempDir()
	// Six clusters at once: the engines are a plain build of p2pfault, not
	// this race-instrumented test binary, which would starve a 2-core box.
	bin := buildP2pfault(t)
	cmd, log := startCommand(t, bin, "slice", "--arms", "main,fixed", "--time-scale", "0.25", "--quiet", "--compare-seed", "--out", out)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("slice exit %d (%v), want 1 (main stall fails)\n%s", code, err, log)
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("slice did not finish in 4 minutes\n%s", log)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var rep sliceReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TimeScale != scale {
		t.Errorf("time_scale %v, want %v", rep.TimeScale, scale)
	}
	if len(rep.Rows) != 6 {
		t.Fatalf("%d rows, want 6\n%s", len(rep.Rows), data)
	}
	for _, r := range rep.Rows {
		name := r.Arm + "/" + r.Case
		wantPass := name != "main/stall"
		if r.Passed != wantPass {
			t.Errorf("%s: passed=%v, want %v; checks %+v", name, r.Passed, wantPass, r.Checks)
		}
		if r.Faulted.N == 0 {
			t.Errorf("%s: no faulted pulls", name)
		}
		// Every pull that returned 200 answered its source's text: the
		// faults change where the KV comes from, never what it holds.
		content := false
		for _, c := range r.Checks {
			if c.Name == "content_matches" {
				content = true
				if !c.Passed || !strings.HasPrefix(c.Detail, "all ") {
					t.Errorf("%s: content_matches %+v, want a pass", name, c)
				}
			}
		}
		if !content {
			t.Errorf("%s: no content_matches among %+v", name, r.Checks)
		}
		// Healthy source: >= 90 % hit, each well within the 5 s × scale bound.
		if r.Healthy.N == 0 || float64(r.Healthy.Pulled) < 0.9*float64(r.Healthy.N) {
			t.Errorf("%s: healthy pulled %d/%d, want >= 90%%", name, r.Healthy.Pulled, r.Healthy.N)
		}
		if r.Healthy.Max > 1.0 {
			t.Errorf("%s: healthy max %.2fs, want <= 1s", name, r.Healthy.Max)
		}
		switch {
		case name == "main/stall":
			// The seed: max near the 30 s handshake timeout (here 6 s), p50
			// in between. Windows of the issue, [25, 31] s and [8, 24] s,
			// scaled.
			if r.Faulted.Max < 25*scale || r.Faulted.Max > 31*scale+0.5 {
				t.Errorf("%s: faulted max %.2fs, want in [%.1f, %.1f]", name, r.Faulted.Max, 25*scale, 31*scale+0.5)
			}
			if r.Faulted.P50 < 8*scale || r.Faulted.P50 > 24*scale {
				t.Errorf("%s: faulted p50 %.2fs, want in [%.1f, %.1f]", name, r.Faulted.P50, 8*scale, 24*scale)
			}
			if !strings.Contains(failingDetails(r.Checks), "a request naming the faulted source took") {
				t.Errorf("%s: no seed-like failure message in %+v", name, r.Checks)
			}
		case name == "fixed/stall":
			// Prefill while the handshake is pending: p50 tiny, max near
			// the 8 s lookup timeout (the 9 s, scaled, + 0.5 s for
			// a busy machine).
			if r.Faulted.P50 > 0.25 {
				t.Errorf("%s: faulted p50 %.2fs, want <= 0.25s", name, r.Faulted.P50)
			}
			if r.Faulted.Max > 9*scale+0.5 {
				t.Errorf("%s: faulted max %.2fs, want <= %.2fs", name, r.Faulted.Max, 9*scale+0.5)
			}
		default: // kill, remove: refused or reset connections, local prefill at once
			if r.Faulted.P50 > 0.25 {
				t.Errorf("%s: faulted p50 %.2fs, want <= 0.25s", name, r.Faulted.P50)
			}
		}
		if r.Case == "remove" {
			if r.Recovery != nil && r.Recovery.N > 0 {
				t.Errorf("%s: a removed source has no recovery, got %+v", name, *r.Recovery)
			}
		} else if r.Recovery == nil || r.Recovery.N == 0 || 2*r.Recovery.Pulled < r.Recovery.N {
			t.Errorf("%s: recovery %+v, want >= 50%% pulled again", name, r.Recovery)
		}
	}
	checkOpenLoopDuringStall(t, filepath.Join(out, "main-stall", "events.jsonl"), time.Duration(scale*float64(500*time.Millisecond)))
	assertSeedTargets(t, out, scale, 500*time.Millisecond, compressedSlack)
	for _, f := range []string{"report.md", "junit.xml", "report.html", "main-stall/events.jsonl", "main-stall/report.html", "fixed-kill/timeline.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("slice output: %v", err)
		}
	}
	if t.Failed() {
		t.Logf("report.json:\n%s\nlog tail:\n%s", data, tail(log.String(), 60))
	}
}

func failingDetails(checks []struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}) string {
	var b strings.Builder
	for _, c := range checks {
		if !c.Passed {
			b.WriteString(c.Detail + "\n")
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkOpenLoopDuringStall: while source 0 is stalled (pulls naming it hang
// for up to the handshake timeout), trials naming it still start on
// schedule: their number equals rate × stall length ± 1. A trial starts
// with its seed; its pull follows the seed's answer or timeout.
func checkOpenLoopDuringStall(t *testing.T, path string, interval time.Duration) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, _, err := report.ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	var win *event.Window
	var starts []time.Duration
	endCode := -1
	for _, ev := range events {
		if ev.Kind == event.KindEnd {
			endCode = ev.ExitCode
		}
		if ev.Kind == event.KindWindow && ev.Window.End != 0 && win == nil {
			win = ev.Window
		}
		for _, s := range ev.Samples {
			if s.Source == 0 {
				starts = append(starts, s.Start-s.SeedLatency)
			}
		}
	}
	if endCode != 1 {
		t.Errorf("main/stall: the end event carries exit code %d, want 1 (a bound failed)", endCode)
	}
	if win == nil {
		t.Fatal("main/stall: no closed fault window in its events")
	}
	n := 0
	for _, st := range starts {
		if st >= win.Start && st < win.End {
			n++
		}
	}
	want := float64(win.End-win.Start) / float64(interval)
	// The window's edges are the experiment's clock, the trials the probe's:
	// a trial may fall on either side of each edge.
	if math.Abs(float64(n)-want) > 1.5 {
		t.Errorf("main/stall: %d trials naming source 0 started in the %.2fs stall, want %.1f ± 1.5 (one every %v)",
			n, (win.End - win.Start).Seconds(), want, interval)
	}
}
