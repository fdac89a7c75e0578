package experiment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/launch"
	"p2pfault/netfault"
	"p2pfault/runner"
)

// needNet skips a test that changes the kernel's firewall when this
// process cannot (CI runs as root, so there it runs).
func needNet(t *testing.T) {
	t.Helper()
	if err := netfault.Check("this test"); err != nil {
		t.Skipf("skipped: network faults need the firewall, which this process cannot change: %v", err)
	}
}

// netRun starts an experiment on a timeline with network faults and returns
// its event recorder and a channel with Run's error.
func netRun(t *testing.T, ctx context.Context, scale float64, recovery time.Duration, timeline, out string) (*recorder, <-chan error) {
	t.Helper()
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	exp, err := experiment.New(experiment.Config{
		Case:      fault.CaseNone,
		TimeScale: scale,
		Timeline:  timeline,
		Recovery:  recovery,
		Cluster:   launch.Opener{Config: runner.Config{FreePorts: true, ExtraArgs: []string{"--sim-startup-delay=0s"}}},
		OutDir:    out,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); _, err := exp.Run(ctx); errc <- err }()
	t.Cleanup(func() { cancel(); <-done })
	return rec, errc
}

// recordedTable is the firewall table the run's sessions.json names ("" none).
func recordedTable(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, runner.SessionsFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Firewall []struct {
			Table  string   `json:"table"`
			Faults []string `json:"faults"`
		} `json:"firewall"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Firewall) == 0 {
		return ""
	}
	return f.Firewall[0].Table
}

func assertNoTable(t *testing.T, table, when string) {
	t.Helper()
	names, err := netfault.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, table) {
		_, _ = netfault.DeleteTable(table)
		t.Fatalf("%s, table %s is still in the kernel (%v)", when, table, names)
	}
}

// p2pAddrs are the sources' P2P addresses from the engine events seen.
func p2pAddrs(seen []event.Event) map[int]string {
	out := map[int]string{}
	for _, ev := range seen {
		if ev.Kind == event.KindEngine && ev.Engine.Role == event.RoleSource && ev.Engine.P2PPort > 0 {
			out[ev.Engine.Index] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ev.Engine.P2PPort))
		}
	}
	return out
}

// dial reports whether a TCP connect to addr completes within 2 s.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

// TestPartitionDropsUntilHealAndTheTableGoesAtTheEnd: a scripted partition
// of source-0 through the experiment (the path `run --case partition`
// takes): during it a connect to source-0's P2P port does not complete
// within 2 s and one to source-1's does; after the heal both do; its
// verification raises no warning; at the normal end of the run the table
// it recorded in sessions.json is gone from the kernel and the record.
func TestPartitionDropsUntilHealAndTheTableGoesAtTheEnd(t *testing.T) {
	needNet(t)
	out := t.TempDir()
	// At 0.5: partition at 1 s for 5 s, then 2 s of recovery.
	rec, errc := netRun(t, context.Background(), 0.5, 4*time.Second, "at 2s partition source-0 for 10s", out)
	rec.waitFor(t, "the partition", time.Minute, faultOK(fault.ActionPartition, 0))
	seenAt := time.Now()
	table := recordedTable(t, out)
	if !strings.HasPrefix(table, netfault.TablePrefix+"main-none-") {
		t.Fatalf("sessions.json names table %q during the partition, want %smain-none-...", table, netfault.TablePrefix)
	}
	if names, _ := netfault.Tables(); !slices.Contains(names, table) {
		t.Fatalf("table %s is not in the kernel during the partition: %v", table, names)
	}
	addrs := p2pAddrs(rec.seen)
	if len(addrs) != 2 {
		t.Fatalf("P2P addresses of the sources: %v", addrs)
	}
	errs := make(chan error, 2)
	start := time.Now()
	for i := range 2 {
		go func() { errs <- fmt.Errorf("source-%d: %w", i, dial(addrs[i])) }()
	}
	for range 2 {
		err := <-errs
		switch {
		case strings.HasPrefix(err.Error(), "source-0"):
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				// No bound on the time: a busy machine may start the
				// connects late; past the partition's 5 s this one
				// completes and fails here, the figure saying why.
				t.Errorf("connect to partitioned %s: %v, want a timeout after 2 s (the connects began %v after the partition was seen)", addrs[0], err, start.Sub(seenAt))
			}
		case errors.Unwrap(err) != nil:
			t.Errorf("connect to the bystander %s during the partition: %v", addrs[1], err)
		}
	}
	rec.waitFor(t, "the heal", 30*time.Second, faultOK(fault.ActionHeal, 0))
	for i := range 2 {
		if err := dial(addrs[i]); err != nil {
			t.Errorf("connect to source-%d after the heal: %v", i, err)
		}
	}
	for {
		ev, ok := <-rec.ch
		if !ok {
			break
		}
		rec.seen = append(rec.seen, ev)
	}
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	var windows int
	for _, ev := range rec.seen {
		if ev.Kind == event.KindWarning && strings.Contains(ev.Message, "did not take effect") {
			t.Errorf("warning: %s", ev.Message)
		}
		if ev.Kind == event.KindWindow && ev.Window.End > 0 && ev.Window.Recovers {
			windows++
			if d := ev.Window.End - ev.Window.Start; d < 4500*time.Millisecond || d > 6500*time.Millisecond {
				t.Errorf("the partition's window lasted %v, want its 5 s", d)
			}
		}
	}
	if windows != 1 {
		t.Errorf("%d closed fault windows, want the partition's one, closed at its heal", windows)
	}
	assertNoTable(t, table, "after the run's normal end")
	if got := recordedTable(t, out); got != "" {
		t.Errorf("sessions.json still names table %s after the run", got)
	}
}

// TestAnInterruptedRunDeletesItsTable is q and Ctrl-C (and SIGTERM, which
// cli turns into the same cancel): the run's context ends while a
// partition without end is in force.
func TestAnInterruptedRunDeletesItsTable(t *testing.T) {
	needNet(t)
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec, errc := netRun(t, ctx, 0.5, 0, "at 1s partition source-0", out)
	rec.waitFor(t, "the partition", time.Minute, faultOK(fault.ActionPartition, 0))
	table := recordedTable(t, out)
	cancel()
	if err := <-errc; !errors.Is(err, exitcode.ErrInterrupted) {
		t.Errorf("run: %v, want interrupted", err)
	}
	assertNoTable(t, table, "after the run was interrupted")
	if got := recordedTable(t, out); got != "" {
		t.Errorf("sessions.json still names table %s", got)
	}
}

// TestAPanicDeletesTheTable: a kind that panics while a partition is in
// force fails the run (an internal error), and the table still goes.
func TestAPanicDeletesTheTable(t *testing.T) {
	needNet(t)
	t.Cleanup(fault.Register(&fault.Kind{Name: "boom", Order: 99, Act: func(*fault.Fire) error { panic("boom") }}))
	out := t.TempDir()
	rec, errc := netRun(t, context.Background(), 0.5, 0, "at 1s partition source-0; at 3s boom source-1", out)
	rec.waitFor(t, "the partition", time.Minute, faultOK(fault.ActionPartition, 0))
	table := recordedTable(t, out)
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "internal error: boom") {
		t.Errorf("run: %v, want the panic as an internal error", err)
	}
	assertNoTable(t, table, "after a panic")
}
