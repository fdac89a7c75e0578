package experiment_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/runner"
)

// TestSeveralDecodersOnTheVirtualCluster: two sources, two decoders
// (--decoders 2), a stall of source-0, on the virtual cluster in a
// synctest bubble. The run says it has two decoders and sends both
// decoders' states by name; each source's trials go to both decoders in
// turn, each sample naming its own; the verdict breaks every source's
// pulls down by decoder, and the healthy pairs hit throughout while the
// stalled source's pulls through both decoders miss in its window.
func TestSeveralDecodersOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s stall source-0 for 10s", Duration: 30 * time.Second},
			runner.Config{Decoders: 2})
		engines, pairs := map[string]bool{}, map[string]int{}
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindRun:
				if ev.Run.Decoders != 2 {
					t.Errorf("run decoders %d, want 2", ev.Run.Decoders)
				}
			case event.KindEngine:
				engines[ev.Engine.Name] = true
			case event.KindSamples:
				for _, s := range ev.Samples {
					pairs[fmt.Sprintf("source-%d decoder-%d", s.Source, s.Decoder)]++
				}
			}
		}
		for _, name := range []string{"decoder-0", "decoder-1", "source-0", "source-1"} {
			if !engines[name] {
				t.Errorf("no engine event for %s (got %v)", name, engines)
			}
		}
		if engines["decoder"] {
			t.Error(`a run of two decoders named one "decoder"`)
		}
		for _, p := range []string{"source-0 decoder-0", "source-0 decoder-1", "source-1 decoder-0", "source-1 decoder-1"} {
			if pairs[p] < 10 {
				t.Errorf("%d samples of %s, want ≥ 10 (all: %v)", pairs[p], p, pairs)
			}
		}
		got := map[string]event.RankSummary{}
		for _, r := range v.Ranks {
			got[fmt.Sprintf("source-%d decoder-%d %s", r.Source, r.Decoder, r.Part)] = r
		}
		for d := range 2 {
			healthy := got[fmt.Sprintf("source-1 decoder-%d %s", d, check.PartOutside)]
			if healthy.N < 10 || healthy.Pulled != healthy.N {
				t.Errorf("source-1 through decoder-%d: %d of %d hit, want all of ≥ 10", d, healthy.Pulled, healthy.N)
			}
			faulted := got[fmt.Sprintf("source-0 decoder-%d %s", d, check.PartFault)]
			if faulted.N == 0 || faulted.Pulled == faulted.N {
				t.Errorf("source-0 through decoder-%d in its stall: %d of %d hit, want some missing", d, faulted.Pulled, faulted.N)
			}
		}
	})
}
