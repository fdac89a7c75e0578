package experiment_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// TestDecoderChecksKeepOnlyTheSamplesTheyNeed: a 4-minute run of two
// sources and two decoders whose decoder-1 is stalled for 10 s a minute
// in (fired as a key fires it).
// The decoder checks judge that window once its recovery is over and
// every pull sent in it has ended, and let go of the samples no window
// needs: at the end they hold about the last pull timeout's worth (2
// sources, a trial every 0.5 s: 4 a second, ~65 s), not the run's 960;
// the verdict still carries both checks of the stall, passed.
func TestDecoderChecksKeepOnlyTheSamplesTheyNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp, err := experiment.New(experiment.Config{
			Duration: 4 * time.Minute, OutDir: t.TempDir(),
			Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{Decoders: 2, ExtraArgs: []string{"--sim-startup-delay=0s"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := exp.Subscribe()
		samples := 0
		go func() {
			for ev := range ch {
				if ev.Kind == event.KindSamples {
					samples += len(ev.Samples)
				}
			}
		}()
		go func() {
			time.Sleep(time.Minute)
			a := act(fault.ActionStall, 1, fault.Options{For: 10 * time.Second})
			a.Grain = fault.Grain{Decoder: true}
			if err := exp.Fire(a); err != nil {
				t.Errorf("stall decoder-1: %v", err)
			}
		}()
		v, err := exp.Run(context.Background())
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		synctest.Wait()
		kept := exp.KeptSamples()
		t.Logf("%d samples in the run, %d kept by the decoder checks at its end", samples, kept)
		if samples < 800 || kept > 300 {
			t.Errorf("%d samples in the run, %d kept: want about 65 s worth kept (4 a second), not the run's", samples, kept)
		}
		got := decoderChecks(v)
		for _, n := range []string{check.NameHealthyDecoders, check.NameDecoderRecovers} {
			if c, ok := got[n]; !ok || !c.Passed || c.Empty {
				t.Errorf("%s = %+v (present %v), want passed", n, c, ok)
			}
		}
	})
}
