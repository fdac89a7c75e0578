package experiment_test

import (
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
)

// TestAGroupKeyRefusedOnOneArmFiresOnNone: source-0 stalled on fixed
// alone (FireArm), a key's stall on every arm is refused by fixed's one
// check, in the rule's words and naming the arm, and fires on neither:
// main's source-0 is not stalled, and the refusal is the key's answer,
// not a fault event. On virtual clusters, in a synctest bubble.
func TestAGroupKeyRefusedOnOneArmFiresOnNone(t *testing.T) {
	synctest.Test(t, testAGroupKeyRefusedOnOneArmFiresOnNone)
}

func testAGroupKeyRefusedOnOneArmFiresOnNone(t *testing.T) {
	g, err := experiment.NewGroup(virtualArmConfigs(t, func(*experiment.Config) {}))
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel, done := runGroup(t, g)
	rec := &recorder{ch: ch}
	baseline := 0
	rec.waitFor(t, "both arms in baseline", time.Minute, func(ev event.Event) bool {
		if ev.Phase == event.PhaseBaseline {
			baseline++
		}
		return baseline == 2
	})
	if err := g.FireArm("fixed", act(fault.ActionStall, 0, fault.Options{For: time.Minute})); err != nil {
		t.Fatalf("stall fixed's source-0: %v", err)
	}
	rec.waitFor(t, "fixed's source-0 stalled", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindCondition && ev.Arm == "fixed" && ev.Condition.Source == 0 && ev.Condition.Condition == event.CondStalled
	})

	err = g.Fire(act(fault.ActionStall, 0, fault.Options{}))
	rs := fault.RefusalsIn(err)
	const want = "source-0 is already stalled; press c to resume it"
	if len(rs) != 1 || rs[0].Arm != "fixed" || rs[0].Err.Error() != want {
		t.Errorf("a key's stall on both arms returned %v (refusals %+v), want fixed's refusal alone: %q", err, rs, want)
	}
	time.Sleep(5 * time.Second) // on the bubble's clock: time for a stall that fired to show
	cancel()
	<-done
	for ev := range ch {
		rec.seen = append(rec.seen, ev)
	}
	for _, ev := range rec.seen {
		switch {
		case ev.Kind == event.KindFault && ev.Fault.Err != "":
			t.Errorf("a refusal was recorded as a fault: %+v", ev.Fault)
		case ev.Kind == event.KindFault && ev.Arm == "main":
			t.Errorf("the refused key fired on main: %+v", ev.Fault)
		case ev.Kind == event.KindCondition && ev.Arm == "main" && ev.Condition.Condition == event.CondStalled:
			t.Errorf("main's source %d was stalled", ev.Condition.Source)
		}
	}
}
