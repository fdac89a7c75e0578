package experiment_test

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// TestTheDecoderKeyStallsDecoder1: on the dashboard of a virtual run of
// two decoders (in a synctest bubble), D twice points the fault keys at
// decoder-1 (the header says "target decoder-1") and s stalls it: the
// fault event is the key's, on decoder-1, and the process table's row of
// decoder-1 shows the stall's badge. The sources are untouched.
func TestTheDecoderKeyStallsDecoder1(t *testing.T) {
	synctest.Test(t, testTheDecoderKeyStallsDecoder1)
}

func testTheDecoderKeyStallsDecoder1(t *testing.T) {
	exp, err := experiment.New(experiment.Config{
		Case: fault.CaseNone,
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{
			Decoders: 2, ExtraArgs: []string{"--sim-startup-delay=0s"},
		}},
		OutDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	tm := bubbleDashboard(t, exp, 160, 48)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := exp.Run(ctx); done <- err }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = tm.Quit()
		tm.WaitFinished(t)
	})
	rec.waitFor(t, "the baseline", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindPhase && ev.Phase == event.PhaseBaseline
	})
	wait := func(what string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
			teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	}
	for _, want := range []string{"target decoder-0", "target decoder-1"} {
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("D")})
		wait(want)
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("s")})
	ev := rec.waitFor(t, "the keyed stall", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionStall && ev.Fault.By == "key"
	})
	if ev.Fault.Err != "" || ev.Fault.TargetName() != "decoder-1" {
		t.Fatalf("s on decoder-1: %+v (target %s)", ev.Fault, ev.Fault.TargetName())
	}
	cond := rec.seenOrWait(t, "decoder-1's stalled condition", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindCondition && ev.Condition.Source == -2 && ev.Condition.Condition == event.CondStalled
	})
	// decoder-1's row in the process table: its name, then its badge.
	wait("decoder-1")
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		i := bytes.LastIndex(b, []byte("decoder-1  "))
		return i >= 0 && bytes.Contains(b[i:min(i+120, len(b))], []byte(cond.Condition.Label))
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	for _, e := range rec.seen {
		if e.Kind == event.KindCondition && e.Condition.Source >= 0 && e.Condition.Condition != event.CondUp &&
			e.Condition.Condition != event.CondStarting {
			t.Errorf("a source's condition changed: %+v", *e.Condition)
		}
	}
}
