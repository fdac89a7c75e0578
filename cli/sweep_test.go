package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
)

// TestVirtualSweepOfTheHandshakeTimeout runs main's stall once per value
// of VLLM_P2P_HANDSHAKE_TIMEOUT_S on the virtual cluster: the faulted max
// follows the value (the stale-routed reconnect waits out its handshake
// deadline, MODEL.md mechanisms 5 and 6), each row carries its setting in
// report.json, the table has the setting's column, and report.html plots
// both rows against the value. A 20 s stall and a 5 s recovery keep it
// short: the session reaped at the lookup deadline (18 s) reconnects into
// the stopped source, whose resume at 30 s drops the connect into its
// stale route, so the reconnect still waits out the whole deadline.
func TestVirtualSweepOfTheHandshakeTimeout(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		r = runVirtual(t, offGrid("slice", "--arms", "main", "--cases", "stall", "--quiet",
			"--stall-for", "20s", "--recovery", "5s", "--sweep", "VLLM_P2P_HANDSHAKE_TIMEOUT_S=10,30", "--out", out)...)
	})
	if r.code != 1 {
		t.Fatalf("slice exit %d, want 1 (the 30 s row fails faulted_max)\n%s%s", r.code, tail(r.stdout, 40), r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			Settings []struct{ Name, Value string } `json:"settings"`
			Passed   bool                           `json:"passed"`
			Faulted  struct {
				Max float64 `json:"max_s"`
			} `json:"faulted"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2\n%s", len(rep.Rows), data)
	}
	// The deadline plus the sim's own costs (a lookup, a prefill: tens of
	// milliseconds) and the burst of recomputes at the deadline, as
	// TestVirtualSliceGivesTheSeedsTable's 30 s.
	for i, want := range []struct {
		value string
		lo    float64
	}{{"10", 10}, {"30", 30}} {
		row := rep.Rows[i]
		if len(row.Settings) != 1 || row.Settings[0].Name != "VLLM_P2P_HANDSHAKE_TIMEOUT_S" || row.Settings[0].Value != want.value {
			t.Errorf("row %d: settings %+v, want VLLM_P2P_HANDSHAKE_TIMEOUT_S=%s", i, row.Settings, want.value)
		}
		if hi := want.lo + 0.1 + burstS; row.Faulted.Max < want.lo || row.Faulted.Max > hi {
			t.Errorf("row %d (%s s): faulted max %.3fs, want in [%g, %.3f]", i, want.value, row.Faulted.Max, want.lo, hi)
		}
	}
	// The handshake bounds nothing else: 30 s breaks faulted_max's 15 s.
	if rep.Rows[1].Passed {
		t.Errorf("the 30 s row passed:\n%s", data)
	}
	if !strings.Contains(r.stdout, "arm   case   VLLM_P2P_HANDSHAKE_TIMEOUT_S  result") {
		t.Errorf("the slice's table lacks the setting's column:\n%s", tail(r.stdout, 40))
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `"setting":"VLLM_P2P_HANDSHAKE_TIMEOUT_S","values":["10","30"]`) {
		t.Error("report.html has no sweep chart of both values")
	}
	for _, dir := range []string{"main-stall-VLLM_P2P_HANDSHAKE_TIMEOUT_S_10", "main-stall-VLLM_P2P_HANDSHAKE_TIMEOUT_S_30"} {
		if _, err := os.Stat(filepath.Join(out, dir, "events.jsonl")); err != nil {
			t.Errorf("row folder: %v", err)
		}
	}
}
