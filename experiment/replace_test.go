package experiment_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/vcluster"
)

// TestReplaceNamesTheNewAddressFromTheMomentItIsReady runs case replace on
// a simulated cluster in both modes and checks, from the events alone, what
// a replay or a reader of events.jsonl would: source-0's new engine has new
// ports (HTTP and P2P) and is a new engine (its restarts count it); one address event says the probe
// names its P2P address from At on; no pull sent from At on names the old
// address, and the pulls before the fault named the old one; the window
// closes at or after At, so recovery is measured on the new address; the
// replace is verified as a kill is. On the virtual cluster, in synctest
// bubbles at the seed's time, where the verdict is the machine's load's
// no more: it passes.
func TestReplaceNamesTheNewAddressFromTheMomentItIsReady(t *testing.T) {
	for _, mode := range []string{event.ModeP2P, event.ModePD} {
		t.Run(mode, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { testReplace(t, mode) }) })
	}
}

func testReplace(t *testing.T, mode string) {
	evs, v, err := runExperiment(t, experiment.Config{
		Case: fault.ActionReplace,
		Mode: mode,
		// The sim's own model load (1 s) for every start, the
		// replacement's too: on the virtual cluster a start costs
		// nothing else, and a replacement ready at the very instant of
		// the kill would leave no pull to judge.
		Cluster: vcluster.Opener{Seed: 1},
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	checkReplaceEvents(t, evs, mode)
	// The verdict is exact on the bubble's clock: the window lasts the new
	// engine's 1 s model load, shorter than the 2 s detect time, so
	// faulted_median_after_detect has no pull (empty, failed) in either
	// mode; in pd the decoder's KV loads from the killed prefiller are
	// refused (the default kv_load_failure_policy, fail: 500s) and fail
	// all_200. Every other check passes.
	wantFailed := map[string]bool{check.NameFaultedMedian: true}
	if mode == event.ModePD {
		wantFailed[check.NameAll200] = true
	}
	for _, c := range v.Checks {
		if c.Passed == wantFailed[c.Name] {
			t.Errorf("%s passed %v, want %v: %s", c.Name, c.Passed, !wantFailed[c.Name], c.Detail)
		}
	}
}

func checkReplaceEvents(t *testing.T, evs []event.Event, mode string) {
	t.Helper()
	var (
		first, moved *event.AddressInfo
		fault0       time.Duration = -1
		window       *event.Window
		verified     *event.Verification
		samples      []event.Sample
		enginePorts  = map[int]bool{} // source-0's P2P ports over the run
		restarts     = map[int]bool{}
	)
	for _, ev := range evs {
		switch ev.Kind {
		case event.KindRun:
			if ev.Run.Mode != mode {
				t.Errorf("run event mode %q, want %q", ev.Run.Mode, mode)
			}
		case event.KindAddress:
			a := ev.Address
			if a.Source != 0 {
				continue
			}
			switch {
			case a.Prev == "" && first == nil:
				first = a
			case a.Prev != "":
				if moved != nil {
					t.Errorf("a second address change for source-0: %+v after %+v", a, moved)
				}
				moved = a
			}
		case event.KindFault:
			if ev.Fault.Source == 0 && ev.Fault.Action == fault.ActionReplace && ev.Fault.Err == "" {
				fault0 = ev.T
			}
		case event.KindWindow:
			if ev.Window.Source == 0 && ev.Window.End > 0 {
				w := *ev.Window
				window = &w
			}
		case event.KindVerification:
			if ev.Verification.Action == fault.ActionReplace {
				v := *ev.Verification
				verified = &v
			}
		case event.KindSamples:
			samples = append(samples, ev.Samples...)
		case event.KindEngine:
			if ev.Engine.Name == "source-0" {
				enginePorts[ev.Engine.P2PPort] = true
				restarts[ev.Engine.Restarts] = true
			}
		}
	}
	if first == nil || moved == nil || fault0 < 0 || window == nil {
		t.Fatalf("first address %+v, new address %+v, replace at %v, closed window %+v: want all four", first, moved, fault0, window)
	}
	if moved.Prev != first.P2P || moved.P2P == first.P2P || moved.URL == first.URL {
		t.Errorf("address %s (%s) then %s (%s), prev %s: want new HTTP and P2P addresses", first.P2P, first.URL, moved.P2P, moved.URL, moved.Prev)
	}
	_, p, _ := net.SplitHostPort(moved.P2P)
	newPort, _ := strconv.Atoi(p)
	if !enginePorts[newPort] || !restarts[0] || !restarts[1] {
		t.Errorf("source-0's engine events show P2P ports %v and restart counts %v: want the new port %d and a new engine", enginePorts, restarts, newPort)
	}
	if moved.At <= fault0 || window.End < moved.At {
		t.Errorf("replace at %v, new address named from %v, window closed at %v: want fault < switch ≤ window end", fault0, moved.At, window.End)
	}
	var before, after, hitsAfter int
	for _, s := range samples {
		if s.Source != 0 || s.Peer == "" {
			continue
		}
		switch {
		// A pull sent at the very instant of the switch (the bubble's
		// clock does not move between them) may have read the address
		// just before it: every pull sent after it names the new one.
		case s.Start > moved.At:
			after++
			if s.Peer != moved.P2P {
				t.Errorf("trial %d sent at %v, after the switch at %v, names %s, want %s", s.Trial, s.Start, moved.At, s.Peer, moved.P2P)
			}
			if s.Hit() {
				hitsAfter++
			}
		case s.Start < fault0:
			before++
			if s.Peer != first.P2P {
				t.Errorf("trial %d sent at %v, before the replace, names %s, want %s", s.Trial, s.Start, s.Peer, first.P2P)
			}
		}
	}
	if before == 0 || after < 5 || hitsAfter == 0 {
		t.Errorf("%d pulls before the replace, %d after the switch (%d hits): want some of each, and hits on the new engine", before, after, hitsAfter)
	}
	if verified == nil || !verified.Verified || !strings.Contains(verified.Detail, moved.P2P) {
		t.Errorf("replace verification %+v: want it seen, naming the new address %s", verified, moved.P2P)
	}
}
