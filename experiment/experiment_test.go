package experiment_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/cli"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/internal/syncbuf"
	"p2pfault/launch"
	"p2pfault/runner"
	"p2pfault/ui"
	"p2pfault/vcluster"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
)

// TestMain lets the simulated engines this test starts be the test binary
// itself (P2PFAULT_TEST_MAIN=1 is inherited by every engine).
func TestMain(m *testing.M) {
	if os.Getenv("P2PFAULT_TEST_MAIN") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// recorder collects a run's events and lets the test wait for one.
type recorder struct {
	ch   <-chan event.Event
	seen []event.Event
}

func (r *recorder) waitFor(t *testing.T, what string, limit time.Duration, ok func(event.Event) bool) event.Event {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case ev, open := <-r.ch:
			if !open {
				t.Fatalf("the run ended before %s", what)
			}
			r.seen = append(r.seen, ev)
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within %v", what, limit)
		}
	}
}

func faultOK(action string, src int) func(event.Event) bool {
	return func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == action && ev.Fault.Source == src && ev.Fault.Err == ""
	}
}

// TestControllerFiresFaultsAndRefusesWhatCannotAct drives a dashboard-like
// run through the Controller: stall and resume, kill (the source restarts
// and is ready again), remove and restore; a fault on a source that is
// removed is refused with the reason, and every fault opens and closes its
// window. Ending the context ends the run as interrupted, engines stopped.
//
// On real processes it is the test of /proc verification: every action
// is verified from what /proc and the ports show, in time.
func TestControllerFiresFaultsAndRefusesWhatCannotAct(t *testing.T) {
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0") // engines exit often; a -race binary sleeps 1 s at exit
	testController(t, 0.2, launch.Opener{Config: runner.Config{
		FreePorts: true,
		ExtraArgs: []string{"--sim-startup-delay=0s", "--p2p-pending-handshake=prefill"},
	}}, false)
}

// TestControllerOnTheVirtualCluster is the same drive of the Controller
// on the virtual cluster, in a synctest bubble at the seed's time: each
// action is verified from what its target reports, at the very instant
// of the action (After 0).
func TestControllerOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		testController(t, 1, vcluster.Opener{Seed: 1, Config: runner.Config{
			ExtraArgs: []string{"--sim-startup-delay=0s", "--p2p-pending-handshake=prefill"},
		}}, true)
	})
}

func testController(t *testing.T, scale float64, cl experiment.Opener, exact bool) {
	exp, err := experiment.New(experiment.Config{
		Case:      fault.CaseNone,
		TimeScale: scale,
		FaultFor:  300 * time.Second, // a key's stall: a minute at 0.2, so only the resume key ends it however late the test gets there
		Cluster:   cl,
		OutDir:    t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runErr error
	done := make(chan struct{})
	go func() { defer close(done); _, runErr = exp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	rec.waitFor(t, "baseline", time.Minute, func(ev event.Event) bool { return ev.Phase == event.PhaseBaseline })

	if err := exp.Fire(act(fault.ActionStall, 0, fault.Options{})); err != nil {
		t.Fatalf("stall source-0: %v", err)
	}
	if err := exp.Fire(act(fault.ActionStall, 0, fault.Options{})); err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("a second stall of source-0: %v, want a refusal saying it is stalled", err)
	}
	rec.waitFor(t, "a stopped source-0", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindEngine && ev.Engine.Name == "source-0" && ev.Engine.State == event.StateStopped
	})
	if err := exp.Fire(act(fault.ActionResume, 0, fault.Options{})); err != nil {
		t.Fatalf("resume source-0: %v", err)
	}
	w := rec.waitFor(t, "the stall window closing", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindWindow && ev.Window.End != 0
	})
	if w.Window.Source != 0 || w.Window.End <= w.Window.Start {
		t.Errorf("stall window %+v, want source 0 with End > Start", *w.Window)
	}
	if err := exp.Fire(act(fault.ActionResume, 0, fault.Options{})); err == nil {
		t.Error("resume of a source that is not stalled: no error")
	}

	if err := exp.Fire(act(fault.ActionKill, 0, fault.Options{})); err != nil {
		t.Fatalf("kill source-0: %v", err)
	}
	rec.waitFor(t, "source-0 ready after the kill", 30*time.Second, faultOK(fault.ActionReady, 0))

	if err := exp.Fire(act(fault.ActionRemove, 1, fault.Options{})); err != nil {
		t.Fatalf("remove source-1: %v", err)
	}
	// A key's refusal is its answer (a *fault.Refused, which the
	// dashboard logs), not a fault of the run: no event records it.
	for _, kind := range []string{fault.ActionStall, fault.ActionKill, fault.ActionRemove} {
		err := exp.Fire(act(kind, 1, fault.Options{}))
		if rs := fault.RefusalsIn(err); len(rs) != 1 || !strings.Contains(err.Error(), "removed") {
			t.Errorf("%s of removed source-1: %v, want a refusal saying it is removed", kind, err)
		}
	}
	if err := exp.Fire(act(fault.ActionRestore, 1, fault.Options{})); err != nil {
		t.Fatalf("restore source-1: %v", err)
	}
	rec.waitFor(t, "source-1 ready after the restore", 30*time.Second, faultOK(fault.ActionReady, 1))

	// The run goes on until it has sent pulls and scraped the decoder: on
	// the virtual cluster's fake clock every action above may come within
	// one 100 ms batch, before any pull start or once-a-second scrape.
	var sawStart, sawScrape bool
	note := func(ev event.Event) bool {
		sawStart = sawStart || ev.Kind == event.KindPullStart && len(ev.Pulls) > 0
		sawScrape = sawScrape || ev.Kind == event.KindMetrics && ev.Metrics.Engine == "decoder" && ev.Metrics.Reading.Waiting.OK
		return sawStart && sawScrape
	}
	for _, ev := range rec.seen {
		note(ev)
	}
	if !sawStart || !sawScrape {
		rec.waitFor(t, "a pull start and a decoder scrape", time.Minute, note)
	}

	cancel()
	select {
	case <-done:
		if !errors.Is(runErr, exitcode.ErrInterrupted) {
			t.Errorf("run ended with %v, want interrupted", runErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end 30 s after its context was cancelled")
	}
	var final, end bool
	for ev := range rec.ch {
		rec.seen = append(rec.seen, ev)
		final = final || (ev.Kind == event.KindVerdict && ev.Final)
		if ev.Kind == event.KindEnd {
			end = true
			if ev.ExitCode != exitcode.Interrupted {
				t.Errorf("end event exit code %d, want %d", ev.ExitCode, exitcode.Interrupted)
			}
		}
	}
	if !final || !end {
		t.Errorf("final verdict %v, end event %v: want both", final, end)
	}
	// Every action was verified on the host, in time; pulls were told as
	// they started; every engine's /metrics was scraped; the final verdict
	// judges fault_took_effect and carries the latest fault's times.
	verified := map[string]int{}
	var starts, decoderMetrics int
	var finalV *event.Verdict
	for _, ev := range rec.seen {
		switch ev.Kind {
		case event.KindVerification:
			v := ev.Verification
			if !v.Verified || v.After > check.DefaultVerifyWithin || exact && v.After != 0 {
				t.Errorf("%s source-%d not verified in time: %+v", v.Action, v.Source, *v)
			}
			verified[v.Action]++
		case event.KindPullStart:
			starts += len(ev.Pulls)
		case event.KindFault:
			if ev.Fault.Err != "" && ev.Fault.By == "key" {
				t.Errorf("a key's refusal was recorded as a fault: %+v", *ev.Fault)
			}
		case event.KindMetrics:
			if ev.Metrics.Engine == "decoder" && ev.Metrics.Reading.Waiting.OK {
				decoderMetrics++
			}
		case event.KindVerdict:
			if ev.Final {
				finalV = ev.Verdict
			}
		}
	}
	for _, a := range []string{fault.ActionStall, fault.ActionResume, fault.ActionKill, fault.ActionRemove} {
		if verified[a] != 1 {
			t.Errorf("%d verifications of %s, want 1 (all: %v)", verified[a], a, verified)
		}
	}
	if starts == 0 || decoderMetrics == 0 {
		t.Errorf("%d pull starts, %d decoder scrapes: want both", starts, decoderMetrics)
	}
	if finalV != nil {
		var took *event.Result
		for i, c := range finalV.Checks {
			if c.Name == check.NameFaultTookEffect {
				took = &finalV.Checks[i]
			}
		}
		if took == nil || !took.Passed {
			t.Errorf("final verdict's %s = %+v, want passed", check.NameFaultTookEffect, took)
		}
		if finalV.Times == nil {
			t.Error("final verdict without times")
		}
	}
	exited := map[string]bool{}
	for _, ev := range rec.seen {
		if ev.Kind == event.KindEngine {
			exited[ev.Engine.Name] = ev.Engine.State == event.StateExited || ev.Engine.State == event.StateRemoved
		}
	}
	for _, name := range []string{"source-0", "source-1", "decoder"} {
		if !exited[name] {
			t.Errorf("%s's last state is not exited", name)
		}
	}
}

// bubbleTUI is the dashboard over an experiment's events, as dashboard
// draws it, for a test inside a synctest bubble: teatest listens for
// SIGINT, which no bubble may (a signal is delivered from outside it), so
// this runs the same program without any signal handling and keeps what
// it draws. Its methods are the ones the tests use of teatest's.
type bubbleTUI struct {
	p    *tea.Program
	out  *syncbuf.Buffer
	done chan struct{}
}

func bubbleDashboard(t *testing.T, exp *experiment.Experiment, w, h int) *bubbleTUI {
	t.Helper()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	b := &bubbleTUI{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	b.p = tea.NewProgram(ui.New(exp, exp.Subscribe(), ui.Options{Renderer: r, Frame: 5 * time.Millisecond}),
		tea.WithInput(&bytes.Buffer{}), tea.WithOutput(b.out),
		tea.WithoutSignalHandler(), tea.WithoutSignals(), tea.WithANSICompressor())
	go func() {
		defer close(b.done)
		if _, err := b.p.Run(); err != nil {
			t.Errorf("dashboard: %v", err)
		}
	}()
	b.p.Send(tea.WindowSizeMsg{Width: w, Height: h})
	return b
}

func (b *bubbleTUI) Send(m tea.Msg)    { b.p.Send(m) }
func (b *bubbleTUI) Output() io.Reader { return b.out }
func (b *bubbleTUI) Quit() error       { b.p.Quit(); return nil }

// WaitFinished waits for the program to end (at most 5 s of the bubble's
// clock: the program ends at once when quit).
func (b *bubbleTUI) WaitFinished(t *testing.T, _ ...teatest.FinalOpt) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		t.Error("the dashboard did not finish within 5s of being quit")
	}
	// The program does not wait for its commands' goroutines (a frame's
	// tick, the event feed's gap): they end once their timers fire,
	// which the bubble's clock does only while the test still waits.
	time.Sleep(2 * time.Second)
}
