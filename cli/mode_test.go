package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"p2pfault/event"
	"p2pfault/report"
)

// TestModeFlagsAreUsageErrorsWhenBad: a mode p2pfault does not know, or
// --mode and --modes together, or a mode given twice, is exit 2 naming it.
func TestModeFlagsAreUsageErrorsWhenBad(t *testing.T) {
	doctorEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--headless", "--mode", "nixl"}, `p2pfault: --mode "nixl": want p2p or pd` + "\n"},
		{[]string{"slice", "--modes", "p2p,nixl"}, `p2pfault: --modes "nixl": want p2p or pd` + "\n"},
		{[]string{"slice", "--mode", "pd", "--modes", "p2p"}, "p2pfault: --mode and --modes both given: name the modes with one of them\n"},
		{[]string{"slice", "--modes", "pd,pd"}, `p2pfault: --modes: "pd" given twice` + "\n"},
		{[]string{"doctor", "slice", "--modes", "pd,pd"}, `p2pfault: --modes: "pd" given twice` + "\n"},
	} {
		code, out, errOut := doctorMain(t, tt.args...)
		if code != 2 || out != "" || errOut != tt.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// TestDoctorChecksTheSameCommandLinesInPDMode: pd mode launches the engines
// exactly as p2p mode does (run_accuracy_test.sh has one command line for
// both; the proxy makes the difference), so doctor checks the same.
func TestDoctorChecksTheSameCommandLinesInPDMode(t *testing.T) {
	doctorEnv(t)
	vllm := standIns(t, "")
	base := []string{"doctor", "--engine", "vllm", "--vllm-bin", vllm, "--gpus", "0,1", "--free-ports", "--case", "stall"}
	_, p2p, _ := doctorMain(t, append(base, "--mode", "p2p")...)
	code, pd, errOut := doctorMain(t, append(base, "--mode", "pd")...)
	if code != 0 || pd != p2p {
		t.Errorf("doctor --mode pd: exit %d\n%s%s\nwant what --mode p2p printed:\n%s", code, pd, errOut, p2p)
	}
	code, out, errOut := doctorMain(t, "doctor", "slice", "--engine", "vllm", "--vllm-bin", vllm, "--gpus", "0,1,2,3", "--modes", "p2p,pd", "--cases", "kill")
	if code != 0 || !strings.Contains(out, "lists all 9 options the run passes") {
		t.Errorf("doctor slice --modes p2p,pd: exit %d\n%s%s", code, out, errOut)
	}
}

// TestSliceModesAddRowsWithAModeColumn runs kill in both modes on the
// virtual cluster at time scale 1 and checks the rows, their folders, the
// table's mode column, and that one row's events rebuild it, mode
// included. What each mode's rows must be (the pd stall's decode legs
// ending on the heartbeat or the reconnect's 30 s handshake deadline, its
// prefiller's tier full of parked stores after SIGCONT) is experiment's
// TestSeedTableOnTheVirtualCluster's to say; this is the slice's faces.
func TestSliceModesAddRowsWithAModeColumn(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var run virtualRun
	synctest.Test(t, func(t *testing.T) {
		run = runVirtual(t, offGrid("slice", "--modes", "p2p,pd", "--arms", "main", "--cases", "kill", "--quiet", "--out", out)...)
	})
	if run.code != 0 {
		t.Fatalf("slice exit %d, want 0 (both kills pass)\n%s%s", run.code, run.stdout, run.stderr)
	}
	log := bytes.NewBufferString(run.stdout + run.stderr)
	var rep struct {
		Rows []struct {
			Arm, Mode, Case string
			Passed          bool
			Checks          []struct {
				Name   string `json:"name"`
				Passed bool   `json:"passed"`
				Detail string `json:"detail"`
			} `json:"checks"`
			Faulted struct {
				N   int     `json:"n"`
				Max float64 `json:"max_s"`
			}
			Recovery *struct {
				N      int `json:"n"`
				Pulled int `json:"pulled"`
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Rows {
		name := r.Arm + "/" + r.Mode + "/" + r.Case
		names = append(names, name)
		// On the fake clock the kill rows pass in both modes: the decode
		// leg that reached a restarted engine's P2P port just before its
		// HTTP port opened (a load-timeout wait, README "PD mode") is a
		// timing a loaded machine chose; here the engine's start is exact.
		if !r.Passed {
			t.Errorf("%s: failed, want a pass; failed checks:\n%s", name, failingDetails(r.Checks))
		}
		if r.Faulted.Max > 0.1 || r.Recovery == nil || r.Recovery.N == 0 || 2*r.Recovery.Pulled < r.Recovery.N {
			t.Errorf("%s: faulted max %.3fs, recovery %+v: want a local prefill's cost and >= 50%% pulled again", name, r.Faulted.Max, r.Recovery)
		}
	}
	if got := strings.Join(names, " "); got != "main/p2p/kill main/pd/kill" {
		t.Errorf("rows %s", got)
	}
	text := log.String()
	for _, want := range []string{"\narm   mode  case  result", "\nmain  p2p   kill  pass", "\nmain  pd    kill  pass", "\narm   mode  case  detect_s  recover_s\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, dir := range []string{"main-kill", "main-pd-kill"} {
		if _, err := os.Stat(filepath.Join(out, dir, "events.jsonl")); err != nil {
			t.Errorf("row folder: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "timeline-main-pd-kill.svg")); err != nil {
		t.Errorf("timeline of the pd row: %v", err)
	}
	// One row's events rebuild its row, mode included, with the seed's
	// six columns (one mode).
	runs, err := report.RebuildAll(filepath.Join(out, "main-pd-kill", "events.jsonl"), t.TempDir())
	if err != nil || len(runs) != 1 {
		t.Fatalf("rebuild main-pd-kill: %d runs, %v", len(runs), err)
	}
	if row := runs[0].Row(); row.Mode != event.ModePD || runs[0].Name() != "main/pd/kill" {
		t.Errorf("rebuilt row %s mode %q, want main/pd/kill in mode pd", runs[0].Name(), row.Mode)
	}
	if table := report.Table(report.Rows(runs)); !strings.HasPrefix(table, "arm   case  result") {
		t.Errorf("a one-mode table has a mode column:\n%s", table)
	}
	for _, s := range runs[0].Samples {
		if s.Peer == "" && s.Err == "" {
			t.Errorf("trial %d names no peer", s.Trial)
			break
		}
	}
	if t.Failed() {
		t.Logf("report.json:\n%s\nlog tail:\n%s", data, tail(text, 60))
	}
}
