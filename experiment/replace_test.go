package experiment_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
)

// TestReplaceNamesTheNewAddressFromTheMomentItIsReady runs case replace on
// a simulated cluster in both modes and checks, from the events alone, what
// a replay or a reader of events.jsonl would: source-0's new engine has new
// ports (HTTP and P2P) in a new session; one address event says the probe
// names its P2P address from At on; no pull sent from At on names the old
// address, and the pulls before the fault named the old one; the window
// closes at or after At, so recovery is measured on the new address; the
// replace is verified on the host as a kill is.
func TestReplaceNamesTheNewAddressFromTheMomentItIsReady(t *testing.T) {
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	for _, mode := range []string{event.ModeP2P, event.ModePD} {
		t.Run(mode, func(t *testing.T) {
			exp, err := experiment.New(experiment.Config{
				Case:      fault.ActionReplace,
				Mode:      mode,
				TimeScale: 0.2,
				Cluster: experiment.Launch{Config: runner.Config{
					FreePorts: true,
					ExtraArgs: []string{"--sim-startup-delay=0s"},
				}},
				OutDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ch := exp.Subscribe()
			var evs []event.Event
			collected := make(chan struct{})
			go func() {
				defer close(collected)
				for ev := range ch {
					evs = append(evs, ev)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			v, err := exp.Run(ctx)
			<-collected
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			checkReplaceEvents(t, evs, mode)
			if !v.Passed {
				t.Logf("verdict (not asserted: a loaded machine): %+v", v.Checks)
			}
		})
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
		sids         = map[int]bool{}
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
				if ev.Engine.Sid > 0 {
					sids[ev.Engine.Sid] = true
				}
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
	if !enginePorts[newPort] || len(sids) < 2 {
		t.Errorf("source-0's engine events show P2P ports %v and sessions %v: want the new port %d and a new session", enginePorts, sids, newPort)
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
		case s.Start >= moved.At:
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
