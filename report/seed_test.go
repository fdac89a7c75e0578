package report

import (
	"strings"
	"testing"
	"time"
)

func cell(t *testing.T, cs []Comparison, arm, c, name string) Comparison {
	t.Helper()
	for _, x := range cs {
		if x.Arm == arm && x.Case == c && x.Cell == name {
			return x
		}
	}
	t.Fatalf("no cell %s/%s %s", arm, c, name)
	return Comparison{}
}

// A compressed run at 4 trials/s: timeout-driven waits are divided by the
// scale, local-prefill latencies are not, counts are brought to 2 trials/s;
// cells outside issue 8's tolerances and a differing verdict are marked.
func TestCompareSeedScalesAndMarks(t *testing.T) {
	rows := []Row{
		{Arm: "main", Case: "stall", Passed: false,
			Faulted:  FaultedRow{N: 108, P50: 4.0, Max: 7.6},
			Healthy:  HealthyRow{N: 120, Pulled: 120, Max: 0.05},
			Recovery: &RecoveryRow{N: 100, Pulled: 60}},
		{Arm: "fixed", Case: "kill", Passed: false,
			Faulted:  FaultedRow{N: 140, P50: 0.05, Max: 0.6},
			Healthy:  HealthyRow{N: 116, Pulled: 116, Max: 0.05},
			Recovery: &RecoveryRow{N: 100, Pulled: 100}},
	}
	sc := SeedScale{TimeScale: 0.25, Interval: 250 * time.Millisecond}
	cs := CompareSeed(rows, sc)
	if c := cell(t, cs, "main", "stall", "faulted p50"); c.Value != 16 || c.Outside || c.Diff != "-0.85 s" {
		t.Errorf("main stall p50: %+v, want 16 s (4 s ÷ 0.25), inside 14.3–19.4", c)
	}
	if c := cell(t, cs, "main", "stall", "faulted max"); c.Value != 30.4 || c.Outside {
		t.Errorf("main stall max: %+v, want 30.4 s inside 29–31", c)
	}
	if c := cell(t, cs, "main", "stall", "recovery"); !c.Outside || c.Target != "75–95 %" {
		t.Errorf("main stall recovery 60 %%: %+v, want outside 75–95 %%", c)
	}
	if c := cell(t, cs, "main", "stall", "result"); c.Outside {
		t.Errorf("main stall FAIL is the seed's verdict: %+v", c)
	}
	if c := cell(t, cs, "fixed", "kill", "result"); !c.Outside || c.Diff != "differs" {
		t.Errorf("fixed kill FAIL against the seed's pass: %+v", c)
	}
	if c := cell(t, cs, "fixed", "kill", "faulted n"); c.Value != 70 || !c.Outside || !strings.Contains(c.Sim, "70 at 2/s") {
		t.Errorf("fixed kill n 140 at 4/s: %+v, want 70 at 2/s, outside 52–64", c)
	}
	if c := cell(t, cs, "fixed", "kill", "faulted max"); c.Value != 0.6 || !c.Outside {
		t.Errorf("fixed kill max 0.6 s, not scaled: %+v, want outside ≤ 0.5", c)
	}
	if c := cell(t, cs, "fixed", "kill", "faulted p50"); c.Value != 0.05 || c.Outside {
		t.Errorf("fixed kill p50 0.05 s, not scaled: %+v", c)
	}
	out := CompareSeedTable(cs, sc)
	for _, want := range []string{"main/stall", "16.00 s", "OUTSIDE", "cells outside their tolerance"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
