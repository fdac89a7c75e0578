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

// TestParkedStoresReturnAfterAKilledDecoder: kill decoder-1 of two in PD
// mode on the virtual cluster (a synctest bubble; --time-scale 0.25, so
// unbound_store_timeout_s is 15 s; --recovery 100s, so the run lasts past
// the check's bound). The prefill legs sent for decoder-1
// while it was down park their stores on both sources, with no decode leg
// to fetch them: each source's sim:p2p_parked_stores rises above its level
// before the kill, and the sources reap them (manager.py
// _reap_unbound_stores), so parked_stores_return_to_baseline passes. With
// the sim's leak-unbound-stores defect (no reaping) the same run fails it,
// not for want of readings.
func TestParkedStoresReturnAfterAKilledDecoder(t *testing.T) {
	for _, tt := range []struct {
		name   string
		defect bool
	}{{"reaped", false}, {"leaked", true}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A real restart's length (the CLI's --restart-length): the
				// prefill legs of the outage park their stores.
				rcfg := runner.Config{Decoders: 2, RestartDelay: runner.DefaultRestartLength}
				if tt.defect {
					rcfg.SourceArgs = []string{"--sim-defect=leak-unbound-stores"}
				}
				evs, v := mustRunVirtual(t, experiment.Config{Mode: event.ModePD, TimeScale: 0.25,
					Timeline: "at 10s kill decoder-1", Recovery: 100 * time.Second}, rcfg)
				peak := map[string]float64{}
				for _, ev := range evs {
					if ev.Kind == event.KindMetrics && ev.Metrics.Reading.ParkedStores.OK {
						peak[ev.Metrics.Engine] = max(peak[ev.Metrics.Engine], ev.Metrics.Reading.ParkedStores.V)
					}
				}
				for _, s := range []string{"source-0", "source-1"} {
					if peak[s] < 3 {
						t.Errorf("%s parked at most %v stores, want the kill to leave ≥ 3 parked (peaks %v)", s, peak[s], peak)
					}
				}
				c, ok := decoderChecks(v)[check.NameParkedStores]
				t.Logf("%s: %s", c.Name, c.Detail)
				switch {
				case !ok:
					t.Fatalf("no %s among %+v", check.NameParkedStores, v.Checks)
				case c.Empty:
					t.Errorf("%s not judged: %s", c.Name, c.Detail)
				case c.Passed == tt.defect:
					t.Errorf("%s passed %v, want %v: %s", c.Name, c.Passed, !tt.defect, c.Detail)
				}
			})
		})
	}
}

// TestParkedCheckKeepsOnlyTheReadingsItNeeds: a 4-minute run of two
// sources and two decoders whose decoder-1 is stalled for 10 s a minute
// in (fired as a key fires it). The parked check judges that window once
// every source's stores are back and lets go of the readings no window
// needs: at the end the four engines' series hold at most about 75 s of
// readings each (twice the 25 s lookback, and one prune period), not the
// run's 240; the verdict still carries the check, passed.
func TestParkedCheckKeepsOnlyTheReadingsItNeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp, err := experiment.New(experiment.Config{
			Duration: 4 * time.Minute, OutDir: t.TempDir(),
			Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{Decoders: 2, ExtraArgs: []string{"--sim-startup-delay=0s"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := exp.Subscribe()
		readings := 0
		go func() {
			for ev := range ch {
				if ev.Kind == event.KindMetrics && ev.Metrics.Reading.ParkedStores.OK {
					readings++
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
		kept := exp.KeptParked()
		t.Logf("%d parked readings in the run, %d kept by the check at its end", readings, kept)
		if readings < 800 || kept > 4*80 {
			t.Errorf("%d readings in the run, %d kept: want at most about 75 s worth of each engine's kept, not the run's", readings, kept)
		}
		c, ok := decoderChecks(v)[check.NameParkedStores]
		if !ok || !c.Passed || c.Empty {
			t.Errorf("%s = %+v (present %v), want passed", check.NameParkedStores, c, ok)
		}
	})
}
