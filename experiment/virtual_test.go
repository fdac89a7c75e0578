package experiment_test

import (
	"context"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// virtualRun is one run of cfg on a virtual cluster of the engines
// rcfg describes, inside the caller's synctest bubble: its verdict, every
// event and how long it took on the bubble's clock.
type virtualRun struct {
	verdict event.Verdict
	err     error
	events  []event.Event
	took    time.Duration
}

func runVirtual(t *testing.T, cfg experiment.Config, rcfg runner.Config) virtualRun {
	t.Helper()
	cfg.Cluster = vcluster.Opener{Config: rcfg, Seed: 1}
	if cfg.OutDir == "" {
		cfg.OutDir = t.TempDir()
	}
	exp, err := experiment.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var r virtualRun
	start := time.Now()
	r.events, r.verdict, r.err = runCollecting(context.Background(), exp)
	r.took = time.Since(start)
	return r
}

// runCollecting runs exp and returns its verdict, error and every event it
// sent, read from a subscription taken before the run.
func runCollecting(ctx context.Context, exp *experiment.Experiment) ([]event.Event, event.Verdict, error) {
	ch := exp.Subscribe()
	var evs []event.Event
	read := make(chan struct{})
	go func() {
		defer close(read)
		for ev := range ch {
			evs = append(evs, ev)
		}
	}()
	v, err := exp.Run(ctx)
	<-read
	return evs, v, err
}

// armArgs are the engines' arguments of an arm, as the command line gives
// them (cli's armArgs): main waits on a pending handshake, fixed prefills.
func armArgs(arm string) []string {
	args := []string{"--sim-startup-delay=0s"}
	if arm == "fixed" {
		args = append(args, "--p2p-pending-handshake=prefill")
	}
	return args
}

// mustRunVirtual is runVirtual failing the test on the run's error: its
// events and verdict.
func mustRunVirtual(t *testing.T, cfg experiment.Config, rcfg runner.Config) ([]event.Event, event.Verdict) {
	t.Helper()
	r := runVirtual(t, cfg, rcfg)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	return r.events, r.verdict
}
