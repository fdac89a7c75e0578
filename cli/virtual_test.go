package cli_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/report"
)

// virtualRun is one p2pfault command run on the virtual cluster.
type virtualRun struct {
	code           int
	stdout, stderr string
	took           time.Duration // on the caller's clock: the bubble's fake one
}

// runVirtual runs p2pfault args with --engine virtual in this process,
// through cli.Execute (no signal handling), so that called inside a
// testing/synctest bubble every engine, the probe and the faces run on the
// bubble's fake clock: a 30 s stall takes the CPU time it needs.
func runVirtual(t *testing.T, args ...string) virtualRun {
	t.Helper()
	return runVirtualCtx(t, context.Background(), args...)
}

// runVirtualCtx is runVirtual ended when ctx is: what SIGINT or SIGTERM
// does to a run in cli.Main.
func runVirtualCtx(t *testing.T, ctx context.Context, args ...string) virtualRun {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := cli.Execute(ctx, append(append([]string(nil), args...), "--engine", "virtual"), strings.NewReader(""), &stdout, &stderr)
	return virtualRun{code: code, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
}

// assertTablesAgree: the slice on real processes (realOut, at realScale)
// and the virtual cluster's (virtualOut, at time scale 1) give the same
// verdict per row, and every cell compare-seed gives a tolerance (issue 8's,
// or the mechanisms' window of a conflicting cell) differs between the two
// by at most that tolerance's width plus the compressed run's slack: the
// two clusters may not drift apart.
func assertTablesAgree(t *testing.T, realOut string, realScale float64, virtualOut string, interval time.Duration) {
	t.Helper()
	real := report.CompareSeed(reportRows(t, realOut), report.SeedScale{TimeScale: realScale, Interval: interval})
	virt := report.CompareSeed(reportRows(t, virtualOut), report.SeedScale{TimeScale: 1, Interval: interval})
	byCell := map[string]report.Comparison{}
	for _, c := range virt {
		byCell[c.Arm+"/"+c.Case+" "+c.Cell] = c
	}
	agreed := 0
	for _, r := range real {
		name := r.Arm + "/" + r.Case + " " + r.Cell
		v, ok := byCell[name]
		if !ok {
			t.Errorf("%s: on real processes only (%s)", name, r.Sim)
			continue
		}
		if r.Cell == "result" {
			agreed++
			if r.Sim != v.Sim {
				t.Errorf("%s: %s on real processes, %s on the virtual cluster", name, r.Sim, v.Sim)
			}
			continue
		}
		var tol report.Range
		tgt, targeted := report.TargetFor(r.Arm, r.Case, r.Cell)
		if w, ok := conflicting[name]; ok {
			tol, targeted = report.Range{Lo: w[0], Hi: w[1]}, true
			tgt, _ = report.TargetFor(r.Arm, r.Case, r.Cell) // its kind: a fraction
		} else {
			tol = tgt.Tol
		}
		if !targeted {
			continue
		}
		agreed++
		width := tolWidth(tol)
		slack := tgt.Slack(compressedSlack.timeout, compressedSlack.compute, compressedSlack.count, compressedSlack.fraction)
		if d := math.Abs(r.Value - v.Value); d > width+slack {
			t.Errorf("%s: %s on real processes, %s on the virtual cluster: %.3g apart, more than the tolerance's width %.3g + slack %.3g (%s)",
				name, r.Sim, v.Sim, d, width, slack, r.Target)
		}
	}
	if agreed < 30 {
		t.Errorf("compared %d cells, want every targeted cell of six rows", agreed)
	}
}

// tolWidth is how far apart two figures inside tol can be: its width, or
// for "at most HI" its HI, and for a fraction of "at least LO" 1 − LO.
func tolWidth(tol report.Range) float64 {
	lo, hi := tol.Lo, tol.Hi
	switch {
	case math.IsNaN(lo) && math.IsNaN(hi):
		return 0
	case math.IsNaN(lo):
		return hi
	case math.IsNaN(hi):
		return math.Max(0, 1-lo)
	}
	return hi - lo
}
