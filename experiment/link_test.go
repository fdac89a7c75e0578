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

// TestLinkedRunOnTheVirtualCluster: with Config.Link, every pull names a
// link of its own decoder ↔ source pair, never the source's own address,
// and the run judges as without: the healthy source's pulls through both
// decoders hit throughout, and the stalled source's miss in its window
// (its silence crosses the link: the link answers no heartbeat).
func TestLinkedRunOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s stall source-0 for 10s", Duration: 30 * time.Second, Link: true},
			runner.Config{Decoders: 2})
		own := map[string]bool{}
		peers := map[string]map[string]bool{} // pair → addresses named
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindAddress:
				own[ev.Address.P2P] = true
			case event.KindSamples:
				for _, s := range ev.Samples {
					pair := fmt.Sprintf("source-%d decoder-%d", s.Source, s.Decoder)
					if peers[pair] == nil {
						peers[pair] = map[string]bool{}
					}
					peers[pair][s.Peer] = true
				}
			}
		}
		seen := map[string]string{}
		for pair, addrs := range peers {
			if len(addrs) != 1 {
				t.Errorf("%s named %v, want one link", pair, addrs)
			}
			for a := range addrs {
				if own[a] {
					t.Errorf("%s named the source's own address %s", pair, a)
				}
				if other, ok := seen[a]; ok {
					t.Errorf("%s and %s share the link %s", pair, other, a)
				}
				seen[a] = pair
			}
		}
		if len(peers) != 4 {
			t.Errorf("pairs sampled %v, want 4", peers)
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
