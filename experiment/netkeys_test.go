package experiment_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/netfault"
	"p2pfault/runner"
	"p2pfault/verify"
)

// TestPartitionKeysOnARealRun: on the dashboard of a real run, n
// partitions the selected source (its P2P port stops answering, the table
// is in the kernel) and h heals it (the port answers again); quitting
// deletes the table.
func TestPartitionKeysOnARealRun(t *testing.T) {
	needNet(t)
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	out := t.TempDir()
	exp, err := experiment.New(experiment.Config{
		Case: fault.CaseNone, TimeScale: 0.5,
		Cluster: experiment.Launch{Config: runner.Config{FreePorts: true, ExtraArgs: []string{"--sim-startup-delay=0s"}}},
		OutDir:  out,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	tm := dashboard(t, exp, 140, 45)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := exp.Run(ctx); errc <- err }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			<-errc
		}
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	})
	rec.waitFor(t, "the baseline", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindPhase && ev.Phase == event.PhaseBaseline
	})
	addr := p2pAddrs(rec.seen)[0]

	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("n")})
	ev := rec.waitFor(t, "the keyed partition", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionPartition && ev.Fault.By == "key"
	})
	if ev.Fault.Err != "" || ev.Fault.Source != 0 {
		t.Fatalf("n: %+v", ev.Fault)
	}
	// A key's partition lasts the run's stall length (30 s × 0.5).
	if ev.Fault.Duration != 15*time.Second {
		t.Errorf("the keyed partition lasts %v, want 15s", ev.Fault.Duration)
	}
	table := recordedTable(t, out)
	if names, _ := netfault.Tables(); !slices.Contains(names, table) {
		t.Fatalf("table %q not in the kernel during the keyed partition: %v", table, names)
	}
	if err := verify.Partitioned(context.Background(), addr, time.Second); err != nil {
		t.Errorf("during the keyed partition: %v", err)
	}

	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("h")})
	rec.waitFor(t, "the keyed heal", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionHeal && ev.Fault.By == "key" && ev.Fault.Err == ""
	})
	if err := dial(addr); err != nil {
		t.Errorf("connect after h: %v", err)
	}

	cancel()
	err = <-errc
	stopped = true
	if !errors.Is(err, exitcode.ErrInterrupted) {
		t.Errorf("run after quit: %v, want interrupted", err)
	}
	assertNoTable(t, table, "after quitting the dashboard")
}
