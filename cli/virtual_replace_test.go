package cli_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
)

// TestReplaceInPDModeMovesThePullsToTheNewAddress: `run --case replace
// --mode pd` on the virtual cluster at time scale 1: source-0 is killed
// and a new engine started in its place on other ports; the run moves
// source-0 to the new address once it answers there, names only that
// address from then on, and judges the row as a kill's (it passes). How an
// attached cluster's replace command gives the new address is
// TestAttachedReplaceInPDMode's.
func TestReplaceInPDModeMovesThePullsToTheNewAddress(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		// The new engine takes 3 s to start, so the fault window outlasts
		// the detect point (fault + 2 s) faulted_median_after_detect judges
		// from, as an attached engine's does in TestAttachedReplaceInPDMode.
		// (The virtual cluster starts a replacement as a first start, not
		// with --restart-length as the runner does.)
		r = runVirtual(t, "run", "--headless", "--case", "replace", "--mode", "pd", "--engine-arg=--sim-startup-delay=3s", "--out", out)
	})
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (a replace row passes as a kill's)\n%s%s", r.code, tail(r.stdout, 40), r.stderr)
	}
	runs, evs := pdReplaceRun(t, out)
	var moved *event.AddressInfo
	var at time.Duration = -1
	for _, ev := range evs {
		if ev.Kind == event.KindAddress && ev.Address.Source == 0 && ev.Address.Prev != "" {
			moved, at = ev.Address, ev.Address.At
		}
	}
	if moved == nil {
		t.Fatalf("no address event for source-0's new engine\n%s", tail(r.stdout, 40))
	}
	if moved.P2P == moved.Prev || moved.P2P == "" || moved.URL == "" {
		t.Errorf("address event %+v, want a new P2P address and URL", *moved)
	}
	after := 0
	for _, s := range runs[0].Samples {
		// Strictly after: on the fake clock a trial may start at the very
		// instant of the switch (13 s, on its schedule), concurrent with it,
		// and name either address; on a real clock the two never tie.
		if s.Source == 0 && s.Start > at {
			after++
			if s.Peer != moved.P2P {
				t.Errorf("trial %d sent at %v, after the switch at %v, names %s, want %s", s.Trial, s.Start, at, s.Peer, moved.P2P)
			}
		}
	}
	if after == 0 {
		t.Error("no pull named source-0 after the switch")
	}
	if !strings.Contains(r.stdout, "source-0: pulls name "+moved.P2P) {
		t.Errorf("the output does not say the new address:\n%s", tail(r.stdout, 40))
	}
}
