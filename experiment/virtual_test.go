package experiment_test

import (
	"context"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/runner"
	"p2pfault/sim"
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
	var r virtualRun
	start := time.Now()
	r.events, r.verdict, r.err = runExperiment(t, cfg)
	r.took = time.Since(start)
	return r
}

// runExperiment builds cfg (in an out folder of its own unless cfg names
// one) and runs it on its Cluster inside the caller's bubble: every event
// it sent, its verdict and the run's error. A config New refuses fails the
// test. The run is cut off at 10 minutes of the bubble's clock, so that a
// run that never ends fails rather than spinning its timers for ever.
func runExperiment(t *testing.T, cfg experiment.Config) ([]event.Event, event.Verdict, error) {
	t.Helper()
	return watchExperiment(t, cfg, nil)
}

// watchExperiment is runExperiment with watch, if not nil, shown each
// event as it comes (on the goroutine that reads them, before the next):
// for a test that acts on the run while it runs.
func watchExperiment(t *testing.T, cfg experiment.Config, watch func(event.Event)) ([]event.Event, event.Verdict, error) {
	t.Helper()
	if cfg.OutDir == "" {
		cfg.OutDir = t.TempDir()
	}
	exp, err := experiment.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The subscription is taken before the run, so no event is missed.
	ch := exp.Subscribe()
	var evs []event.Event
	read := make(chan struct{})
	go func() {
		defer close(read)
		for ev := range ch {
			if watch != nil {
				watch(ev)
			}
			evs = append(evs, ev)
		}
	}()
	v, err := exp.Run(ctx)
	<-read
	return evs, v, err
}

// armArgs are the engines' arguments of a simulated arm, as the command
// line gives them (sim.Arms), with no simulated model load.
func armArgs(arm string) []string {
	args, ok := sim.ArmArgs(arm)
	if !ok {
		panic("no simulated arm " + arm)
	}
	return append([]string{"--sim-startup-delay=0s"}, args...)
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
