package runner_test

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A restarted simulated engine loads for the restart length (scaled by the
// time scale, as every sim delay), a first start for the sim's short
// default: the restarted core's argv carries --sim-startup-delay.
func TestRestartedSimTakesTheRestartLength(t *testing.T) {
	cfg := simConfig(t)
	cfg.Sources = 1
	cfg.RestartDelay = 20 * time.Second // × 0.05 = 1 s
	c, _ := startCluster(t, cfg)
	src := c.Sources()[0]
	t0 := time.Now()
	if err := src.Restart(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < time.Second {
		t.Errorf("restart took %v, want ≥ 1 s (20 s × 0.05)", took)
	}
	in := src.Info()
	if len(in.Members) == 0 {
		t.Fatalf("restarted source has no processes: %+v", in)
	}
	argv := procArgv(t, in.Pid)
	if i := slices.Index(argv, "--sim-startup-delay"); i < 0 || i+1 >= len(argv) || argv[i+1] != "20s" {
		t.Errorf("restarted argv %q, want --sim-startup-delay 20s", argv)
	}
	for _, e := range c.Engines() {
		if e.Name() == src.Name() {
			continue
		}
		if slices.Contains(procArgv(t, e.Info().Pid), "--sim-startup-delay") {
			t.Errorf("%s: a first start carries the restart length", e.Name())
		}
	}
}
