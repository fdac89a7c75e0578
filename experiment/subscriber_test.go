package experiment_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// TestASubscriberThatStopsReadingHoldsUpNothing: one face reads nothing
// until the run has ended, long past what its channel holds, while
// another reads as it comes. The run goes on and ends at its duration;
// past that point Info, LogTail, SetProbing and a key's stall all return
// (a stall that fires, opens its window and closes it again); and the
// face that read nothing then gets every event, in the order the other
// got them. On the virtual cluster, in a synctest bubble.
func TestASubscriberThatStopsReadingHoldsUpNothing(t *testing.T) {
	synctest.Test(t, testASubscriberThatStopsReadingHoldsUpNothing)
}

func testASubscriberThatStopsReadingHoldsUpNothing(t *testing.T) {
	const past = experiment.SubscriberBuffer + 200 // well past what the stuck face's channel holds
	exp, err := experiment.New(experiment.Config{
		// About 27 events a second at this interval: past 264 at about
		// 10 s of the bubble's clock.
		Duration: 20 * time.Second, Interval: 100 * time.Millisecond,
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{
			ExtraArgs: []string{"--sim-startup-delay=0s"},
		}},
		OutDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	stuck := exp.Subscribe()
	live := exp.Subscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := exp.Run(ctx); done <- err }()

	stall, _ := fault.Lookup(fault.ActionStall)
	var seen []event.Event
	acted := false
	for ev := range live {
		seen = append(seen, ev)
		if acted || len(seen) < past {
			continue
		}
		acted = true
		if exp.Info().Sources != 2 {
			t.Errorf("Info: %+v", exp.Info())
		}
		if len(exp.LogTail("source-0", 3)) == 0 {
			t.Error("LogTail(source-0) is empty")
		}
		exp.SetProbing(true)
		if err := exp.Fire(fault.Action{Kind: stall, Source: 0, Options: fault.Options{For: time.Second}}); err != nil {
			t.Errorf("the key's stall: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !acted {
		t.Fatalf("the run sent %d events: never past the stuck face's channel (%d)", len(seen), past)
	}
	var opened, closed bool
	for _, ev := range seen {
		if ev.Kind == event.KindWindow && ev.Window.Source == 0 {
			opened = opened || ev.Window.End == 0
			closed = closed || ev.Window.End > 0
		}
	}
	if !opened || !closed {
		t.Errorf("the key's stall: window opened %v, closed %v; want both", opened, closed)
	}

	var got []event.Event
	for ev := range stuck {
		got = append(got, ev)
	}
	if len(got) != len(seen) {
		t.Fatalf("the face that stopped reading got %d events, the other %d", len(got), len(seen))
	}
	for i := range got {
		if got[i].Seq != seen[i].Seq || got[i].Kind != seen[i].Kind || got[i].Seq != int64(i+1) {
			t.Fatalf("event %d: the face that stopped reading got seq %d (%s), the other seq %d (%s); want 1, 2, 3, ... in both",
				i, got[i].Seq, got[i].Kind, seen[i].Seq, seen[i].Kind)
		}
	}
	t.Logf("%d events, each to both faces in order; the stall fired after event %d", len(got), past)
}
