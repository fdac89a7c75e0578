package experiment_test

import (
	"bytes"
	"context"
	"strings"
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

// TestAKeyAndAScriptAreRefusedWithTheSameWords: source-0 is stalled by
// the script; the dashboard's s and the script's second stall are both
// refused by fault's one rule over the condition the experiment sent,
// in the same words, and the refused key calls nothing. On the virtual
// cluster, in a synctest bubble.
func TestAKeyAndAScriptAreRefusedWithTheSameWords(t *testing.T) {
	synctest.Test(t, testAKeyAndAScriptAreRefusedWithTheSameWords)
}

func testAKeyAndAScriptAreRefusedWithTheSameWords(t *testing.T) {
	exp, err := experiment.New(experiment.Config{
		Case:     fault.CaseNone,
		Timeline: "at 300ms stall source-0 for 1m; at 8s stall source-0",
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{
			ExtraArgs: []string{"--sim-startup-delay=0s"},
		}},
		OutDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := fault.Lookup(fault.ActionStall)
	want := k.Refusal("source-0", event.CondStalled)
	if want != "source-0 is already stalled; press c to resume it" {
		t.Fatalf("the rule's words are %q", want)
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
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	})

	rec.waitFor(t, "source-0's stalled condition", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindCondition && ev.Condition.Source == 0 && ev.Condition.Condition == event.CondStalled
	})
	// Once the dashboard shows it stalled, s is refused there.
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("STALLED")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("s")})
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("s: "+want)) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))

	ev := rec.waitFor(t, "the script's refused stall", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionStall && ev.Fault.Err != ""
	})
	if ev.Fault.By != "script" || ev.Fault.Err != want {
		t.Errorf("the script's stall was refused by %s with %q, want by script with %q", ev.Fault.By, ev.Fault.Err, want)
	}
	refusedAt := time.Now()
	select {
	case err := <-done:
		t.Logf("the run ended %v after the refusal", time.Since(refusedAt))
		done <- err
		if err == nil || !strings.Contains(err.Error(), "at 8s stall source-0: "+want) {
			t.Errorf("run ended with %v, want the refused step and its words", err)
		}
	case <-time.After(time.Second):
		// The engines' graceful stop takes about a millisecond of the
		// bubble's clock; a run that went on would take seconds.
		t.Fatal("the run did not end within 1s of the refused step")
	}
	for _, e := range rec.seen {
		if e.Kind == event.KindFault && e.Fault.By == "key" {
			t.Errorf("the refused key reached the experiment: %+v", e.Fault)
		}
	}
}
