package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/report"
)

// seedSlack is how far outside issue 8's tolerances a cell may fall, per
// kind of cell, in the seed's units.
type seedSlack struct{ timeout, compute, count, fraction float64 }

// compressedSlack is the slack of a compressed run on a shared machine: a
// timeout-driven wait at time scale 0.25 is measured ×4, so 0.25 s of
// scheduling noise reads as 1 s; a local prefill's latency is not scaled;
// a healthy pull whose seed a starved source answered after the seed
// timeout (0.25 s at this scale) misses: one in twenty is noise.
var compressedSlack = seedSlack{timeout: 1.0, compute: 0.15, count: 3, fraction: 0.05}

// virtualSlack is none: on the virtual cluster's fake clock no scheduling
// noise reaches a figure.
var virtualSlack = seedSlack{}

// conflicting are the cells whose issue-8 tolerance no grounded mechanism
// meets (sim/MODEL.md, "Where the seed's table and the mechanisms
// disagree"), with what the mechanisms give: the reconnect window after
// SIGCONT is the ~8 s left of the reconnect's 30 s handshake deadline, so
// (25 − 8)/(25 + p2pfault's 1 s seed timeout) ≈ 65 % of the pulls after
// SIGCONT hit, in both arms.
var conflicting = map[string][2]float64{
	"main/stall recovery":  {0.55, 0.78},
	"fixed/stall recovery": {0.55, 0.78},
}

// assertSeedTargets checks every cell of the slice's report.json against
// the seed's table and issue 8's tolerances (report.SeedTargets), with
// slack, and that compare-seed.txt was written.
func assertSeedTargets(t *testing.T, out string, scale float64, interval time.Duration, sl seedSlack) {
	t.Helper()
	sc := report.SeedScale{TimeScale: scale, Interval: interval}
	cs := report.CompareSeed(reportRows(t, out), sc)
	if len(cs) < 30 {
		t.Fatalf("%d cells compared, want every cell of six rows", len(cs))
	}
	judged := 0
	for _, c := range cs {
		name := c.Arm + "/" + c.Case + " " + c.Cell
		if w, ok := conflicting[name]; ok {
			judged++
			if c.Value < w[0] || c.Value > w[1] {
				t.Errorf("%s: %s, want %.0f–%.0f %% (the mechanisms' arithmetic; issue 8 asks %s)", name, c.Sim, 100*w[0], 100*w[1], c.Target)
			}
			continue
		}
		tgt, ok := report.TargetFor(c.Arm, c.Case, c.Cell)
		if c.Cell == "result" {
			judged++
			if c.Outside {
				t.Errorf("%s: %s, the seed's is %s", name, c.Sim, c.Seed)
			}
			continue
		}
		if !ok {
			continue
		}
		judged++
		slack := tgt.Slack(sl.timeout, sl.compute, sl.count, sl.fraction)
		if !tgt.Tol.Widen(slack).Contains(c.Value) {
			t.Errorf("%s: %s (seed %s), outside %s by more than the slack %g", name, c.Sim, c.Seed, c.Target, slack)
		}
	}
	if judged < 30 {
		t.Errorf("judged %d cells, want every targeted cell", judged)
	}
	text, err := os.ReadFile(filepath.Join(out, "compare-seed.txt"))
	if err != nil || !strings.Contains(string(text), "main/stall") {
		t.Errorf("compare-seed.txt: %v\n%s", err, text)
	}
	if t.Failed() {
		t.Logf("%s", report.CompareSeedTable(cs, sc))
	}
}

// reportRows are the rows of out/report.json.
func reportRows(t *testing.T, out string) []report.Row {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []report.Row `json:"rows"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Rows
}

// eventsOf are the events of the events file at path.
func eventsOf(t *testing.T, path string) []event.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, _, err := report.ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
