package experiment_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
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

// TestANewKindIsOneRegistration registers a fault kind of its own, noop
// (it only logs, and its verification says nothing changed), and fires it from a timeline string and from a dashboard
// key on a run of the virtual cluster (in a synctest bubble): nothing outside this test knows of it, so the next
// kinds (partition, loss, ...) are new pieces, not edits of every face.
func TestANewKindIsOneRegistration(t *testing.T) {
	var mu sync.Mutex
	var acted []string
	unregister := fault.Register(&fault.Kind{
		Name: "noop", Key: "z", Help: "noop", LongHelp: "do nothing, say so", Order: 99,
		Act: func(f *fault.Fire) error {
			t.Logf("noop on %s (%s)", f.Target.Name(), f.By)
			mu.Lock()
			acted = append(acted, f.Target.Name()+" by "+f.By)
			mu.Unlock()
			f.Env.Record("noop", 0, f.By, nil)
			return nil
		},
		// Nothing happened, and verifying says so.
		Verify: func(f *fault.Fire) fault.Effect { return fault.Effect{Detail: "nothing changed"} },
	})
	t.Cleanup(unregister)
	synctest.Test(t, func(t *testing.T) { testANewKindIsOneRegistration(t, &mu, &acted) })
}

func testANewKindIsOneRegistration(t *testing.T, mu *sync.Mutex, acted *[]string) {
	exp, err := experiment.New(experiment.Config{
		Case: fault.CaseNone,
		// From the timeline: once early, once late so the run lasts
		// until the key has fired too.
		Timeline: "at 500ms noop source-1; at 20s noop source-1",
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{
			ExtraArgs: []string{"--sim-startup-delay=0s"},
		}},
		OutDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	tm := bubbleDashboard(t, exp, 140, 45)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = exp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	})

	rec.waitFor(t, "the scripted noop", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == "noop" && ev.Fault.By == "script" && ev.Fault.Source == 1
	})
	rec.waitFor(t, "the warning that it did not take effect", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindWarning && ev.Message == "noop source-1 did not take effect within 2s: nothing changed"
	})
	// The dashboard knows the key from the registry: z fires noop on the
	// selected source (source-0), and the event log shows it.
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("z")})
	rec.waitFor(t, "the keyed noop", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == "noop" && ev.Fault.By == "key" && ev.Fault.Source == 0 && ev.Fault.Err == ""
	})
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("noop source-0 (key)")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("?")})
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("do nothing, say so")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))

	mu.Lock()
	got := strings.Join(*acted, ", ")
	mu.Unlock()
	if !strings.HasPrefix(got, "source-1 by script, source-0 by key") {
		t.Errorf("noop acted on %q, want source-1 by script, then source-0 by key", got)
	}
}
